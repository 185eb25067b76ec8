"""The programs of the Mirage paper's evaluation (arXiv 2405.05751) as ordinary JAX functions.

Nothing here knows about mirage_jax: these are the functions a user writes, and the benchmark
runs each under `jax.jit` and under `mirage_jax.optimize`. `PROGRAMS` lists every benchmarked
case with the paper's shapes and a set of small shapes (`--quick`) that searches in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

EPS = 1e-6


def rms_norm(x, eps=EPS):
    """x / sqrt(mean(x², last axis) + eps), as a model writes it (no gain)."""
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)


def rmsnorm_linear(x, g, w):
    """rms_norm(X)·g @ W."""
    return (rms_norm(x) * g) @ w


def gated_mlp(x, w1, w3):
    """silu(X@W1) * (X@W3), the gate of a SwiGLU MLP."""
    return jax.nn.silu(x @ w1) * (x @ w3)


def gqa_attention(q, k, v):
    """softmax(Q·Kᵀ/√d)·V where each KV head serves a group of query heads.

    q[..., query_heads, tokens, d], k and v [..., kv_heads, kv_len, d]; the leading dims
    (batch) are optional. The query heads of a group are folded into the rows that share
    one KV head, so K and V are read once per group and never copied."""
    *lead, heads, tokens, d = q.shape
    kv_heads = k.shape[-3]
    rows = q.reshape(*lead, kv_heads, heads // kv_heads * tokens, d)
    scores = jnp.einsum("...qd,...kd->...qk", rows, k) / math.sqrt(d)
    out = jnp.einsum("...qk,...kd->...qd", jax.nn.softmax(scores, axis=-1), v)
    return out.reshape(q.shape)


def qknorm_gqa(q, k, v):
    """gqa_attention after rms_norm of every query and every key over the head dim."""
    return gqa_attention(rms_norm(q), rms_norm(k), v)


def lora(x, w, a, b):
    """X@W + (X@A)@B: a linear layer with a low-rank adapter."""
    return x @ w + (x @ a) @ b


def ntrans(h, x, alpha):
    """rms_norm(X + α·(rms_norm(H) − X)), nGPT's normalized residual update."""
    return rms_norm(x + alpha * (rms_norm(h) - x))


@dataclass(frozen=True)
class Program:
    """One benchmarked case: `fn` applied to arrays of `shapes` (paper) or `quick_shapes`."""

    name: str
    fn: object
    shapes: tuple  # one shape per argument, the paper's
    quick_shapes: tuple  # small shapes for --quick and the tests
    description: str

    def arg_shapes(self, quick: bool) -> tuple:
        return self.quick_shapes if quick else self.shapes

    def inputs(self, quick: bool, seed: int = 0, device=None) -> list:
        """Random float32 arguments, already on `device` (default: jax's default device)."""
        rng = np.random.default_rng(seed)
        return [
            jax.device_put(rng.standard_normal(s, dtype=np.float32), device)
            for s in self.arg_shapes(quick)
        ]


PROGRAMS = [
    Program(
        "rmsnorm_linear_bs8",
        rmsnorm_linear,
        ((8, 4096), (4096,), (4096, 6144)),
        ((8, 256), (256,), (256, 512)),
        "rms_norm(X)·g @ W, batch 8",
    ),
    Program(
        "rmsnorm_linear_bs1",
        rmsnorm_linear,
        ((1, 4096), (4096,), (4096, 6144)),
        ((1, 256), (256,), (256, 512)),
        "rms_norm(X)·g @ W, batch 1",
    ),
    Program(
        "gated_mlp",
        gated_mlp,
        ((8, 4096), (4096, 4096), (4096, 4096)),
        ((8, 256), (256, 256), (256, 256)),
        "silu(X@W1)·(X@W3)",
    ),
    Program(
        "gqa_decode",
        gqa_attention,
        ((8, 32, 1, 128), (8, 8, 4096, 128), (8, 8, 4096, 128)),
        ((2, 8, 1, 32), (2, 2, 256, 32), (2, 2, 256, 32)),
        "GQA decode: batch 8, 32 query heads on 8 KV heads, 1 token",
    ),
    Program(
        "gqa_prefill",
        gqa_attention,
        ((8, 64, 64), (2, 4096, 64), (2, 4096, 64)),
        ((8, 8, 32), (2, 256, 32), (2, 256, 32)),
        "GQA prefill, batch 1 (no batch dim): 8 query heads × 64 tokens on 2 KV heads",
    ),
    Program(
        "qknorm_gqa",
        qknorm_gqa,
        ((8, 64, 64), (2, 4096, 64), (2, 4096, 64)),
        ((8, 8, 32), (2, 256, 32), (2, 256, 32)),
        "rms_norm on Q and K, then GQA prefill",
    ),
    Program(
        "lora",
        lora,
        ((16, 256), (256, 4096), (256, 16), (16, 4096)),
        ((16, 64), (64, 256), (64, 16), (16, 256)),
        "X@W + (X@A)@B, rank 16",
    ),
    Program(
        "ntrans",
        ntrans,
        ((8, 4096), (8, 4096), (8, 4096)),
        ((8, 256), (8, 256), (8, 256)),
        "rms_norm(X + α·(rms_norm(H) − X))",
    ),
]

BY_NAME = {p.name: p for p in PROGRAMS}

"""A decode step's attention as the frontend converts it against a KV cache held as
[B, S, N, H] (Flax's and GPT-2's layout): one query per sequence, so each dot is a broadcast
product summed over its contracting dims in the cache's stored order
(mirage_jax/frontend/dot.py, vector_product). Grouped-query attention's query holds a group of
G heads per KV head: the group gets an axis of its own, which the cache broadcasts along, so
those products are rank 5, [B, S, K, G, H]. Written by hand for the benchmarks and the
search tests, at any size.
"""

from __future__ import annotations

import numpy as np

from mirage_jax.ir.graph import KernelGraph


def decode_pv(batch: int = 2, keys: int = 32, heads: int = 4, head_dim: int = 16) -> KernelGraph:
    """P @ V: sum over S of P[B, S, N, 1] * V[B, S, N, H]."""
    g = KernelGraph()
    p = g.new_input((batch, keys, heads, 1))
    v = g.new_input((batch, keys, heads, head_dim))
    g.mark_output(g.reduce(g.mul(p, v), 1, "sum"))
    return g


def decode_softmax(
    batch: int = 2, keys: int = 16, heads: int = 3, head_dim: int = 8
) -> KernelGraph:
    """softmax over the keys of where(mask, sum(q * K over H) / sqrt(H), float32 min): the
    scores, the mask (a 0/1 input) and the softmax. Nine ops, beyond the
    decorator's attention limits of 5 block ops: the search lifts it whole
    (mirage_jax/superopt/lift.py)."""
    g = KernelGraph()
    k = g.new_input((batch, keys, heads, head_dim))
    q = g.new_input((batch, 1, heads, head_dim))
    mask = g.new_input((batch, keys, heads, 1))
    scores = g.mul_scalar(g.reduce(g.mul(q, k), 3, "sum"), head_dim**-0.5)
    scores = g.select(scores, mask, float(np.finfo(np.float32).min))
    e = g.exp(g.sub(scores, g.reduce(scores, 1, "max")))
    g.mark_output(g.div(e, g.reduce(e, 1, "sum")))
    return g


def decode_gqa_pv(
    batch: int = 2, keys: int = 16, kv_heads: int = 2, group: int = 4, head_dim: int = 8
) -> KernelGraph:
    """Grouped-query P @ V: sum over S of P[B, S, K, G, 1] * V[B, S, K, 1, H]."""
    g = KernelGraph()
    v = g.new_input((batch, keys, kv_heads, 1, head_dim))
    p = g.new_input((batch, keys, kv_heads, group, 1))
    g.mark_output(g.reduce(g.mul(p, v), 1, "sum"))
    return g


def decode_gqa_softmax(
    batch: int = 2, keys: int = 16, kv_heads: int = 2, group: int = 4, head_dim: int = 8
) -> KernelGraph:
    """Grouped-query scores, an additive mask over the keys and the softmax, as the frontend
    converts a Llama-style decode step: sum over H of q[B, 1, K, G, H] * K[B, S, K, 1, H],
    scaled, plus mask[B, S, 1, 1, 1], softmax over S. Nine ops: lifted whole."""
    g = KernelGraph()
    k = g.new_input((batch, keys, kv_heads, 1, head_dim))
    q = g.new_input((batch, 1, kv_heads, group, head_dim))
    mask = g.new_input((batch, keys, 1, 1, 1))
    scores = g.add(g.mul_scalar(g.reduce(g.mul(q, k), 4, "sum"), head_dim**-0.5), mask)
    e = g.exp(g.sub(scores, g.reduce(scores, 1, "max")))
    g.mark_output(g.div(e, g.reduce(e, 1, "sum")))
    return g

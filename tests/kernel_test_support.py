"""Helpers shared by the code generation and runtime tests: one kernel cache per pytest
session (kernels compiled by one test are reused by the others), random inputs, and the
tolerance a stored dtype allows, and kernels more than one test runs."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import mirage_jax as mj


@pytest.fixture(autouse=True)
def session_kernel_cache(monkeypatch, tmp_path_factory):
    """Points MIRAGE_JAX_CACHE at a directory shared by every test of this pytest run."""
    path = tmp_path_factory.getbasetemp() / "kernel_cache"
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(path))
    return path


def random_inputs(graph, seed: int = 0) -> list:
    """One array per graph input, of its shape and dtype, drawn from a standard normal."""
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal(t.shape), dtype=t.dtype) for t in graph.inputs]


def assert_close(got, want, rtol: float, what: str, floor: float = 1e-3) -> None:
    """|got - want| <= rtol * (|want| + floor·max|want|): relative, with a floor for elements
    that cancel to near zero (their error scales with the operands, not with the result).
    floor=1 makes it normwise, for references that round after every op."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = floor * float(np.max(np.abs(want))) if want.size else 0.0
    excess = np.abs(got - want) - rtol * (np.abs(want) + scale)
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert excess[worst] <= 0, (
        f"{what}: element {worst} is {got[worst]}, expected {want[worst]} (rtol {rtol})"
    )


def assert_float32_product(got, subscripts: str, a, b, what: str) -> None:
    """got is np.einsum(subscripts, a, b) summed in float32: within one float32 ulp per
    summed term of the sum of the terms' magnitudes (the bound of any summation order)."""
    got = np.asarray(got, np.float64)
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    want = np.einsum(subscripts, a64, b64)
    inputs, output = subscripts.split("->")
    sizes = dict(zip(inputs.replace(",", ""), (*a64.shape, *b64.shape)))
    terms = np.prod([sizes[i] for i in sizes if i not in output])  # products in each element
    bound = terms * np.finfo(np.float32).eps * np.einsum(subscripts, np.abs(a64), np.abs(b64))
    excess = np.abs(got - want) - bound
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert excess[worst] <= 0, f"{what}: element {worst} is {got[worst]}, expected {want[worst]}"


def storage_rtol(dtype: str) -> float:
    """Float32 kernels round once, when they store: half an ulp of the stored dtype, plus
    float32 accumulation error (bounded by 1e-5 for these small shapes)."""
    return float(jnp.finfo(dtype).eps) / 2 + 1e-5


def kernel_rtol(dtype: str, tf32: bool = False) -> float:
    """float32 kernels round once, when they store. 16-bit kernels also round each computed
    tensor-core operand (a normalized Q, the softmax's exp(s - max)) to their dtype: a few
    roundings in a chain, the bound test_codegen_cpu allows bf16 chains. With TF32 allowed,
    float32 matmuls round both operands to 10 mantissa bits (unit roundoff 2^-11) first."""
    if dtype == "float32":
        return 2.0**-10 if tf32 else storage_rtol(dtype)
    return 4 * float(jnp.finfo(dtype).eps)


# Tiles big enough for whole and ragged 16x8x16 tensor-core fragments (m 20, k 40), so every
# fragment register and every bound check of the mma path is exercised, in blocks of 128 and
# of 256 threads.
FRAGMENT_SIZED = {
    "rmsnorm_linear": dict(batch=20, hidden=96, out_features=48, col_tile=24, k_tile=48),
    # 64x64 weight tiles: over 2048 elements, so 256 threads a block
    "gated_mlp": dict(batch=16, hidden=128, intermediate=128, col_tile=64, k_tile=64),
    "lora": dict(tokens=16, d_in=32, d_out=48, rank=8, col_tile=24),
    "flash_attention_online": dict(
        heads=2, q_len=32, kv_len=64, head_dim=16, q_tiles=2, kv_tile=32
    ),
    "qknorm_gqa": dict(
        heads=2, q_len=32, kv_len=64, head_dim=16, kv_splits=2, q_tiles=2, forloop=2
    ),
}


def projection_and_rope_product(dtype: str = "float32", m: int = 8, k: int = 64, n: int = 32):
    """q = x @ w and cos * q from one kernel that stores q's accumulator and multiplies it by
    cos after the loop (the form the search finds for a decode step's q projection with its
    RoPE product): the stored accumulator is also read by the epilogue."""
    g = mj.KernelGraph()
    x, w, cos = g.new_input((m, k), dtype), g.new_input((k, n), dtype), g.new_input((m, n), dtype)
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=4)
    q = bg.accum_sum(bg.matmul(bg.new_input(x, (-1, -1, -1), 1), bg.new_input(w, (1, -1, -1), 0)))
    bg.new_output(bg.mul(bg.new_input(cos, (1, -1, -1), -1), q), (1, -1, -1))
    bg.new_output(q, (1, -1, -1))
    rotated, projected = g.customized([x, w, cos], bg)
    g.mark_output(projected)
    g.mark_output(rotated)
    return g

"""A block whose product runs over several matrices of B in turn (several heads of a decode
attention in one block) prefetches the next matrix's tile while it streams one, and the
next loop step's tile only where B is a single matrix or the product has more than 8 rows
(cc/codegen/cpu/emit_compute.cc, emit_batched_matmul). The next step's tile of the same
matrix is a whole round of the other matrices away: gqa_decode's 8-block candidates (8
heads a block) ran 1.23x the fastest (one head a block) with it and 1.04x with the next
head's tile
(benchmarks/schedule_variants.py). A product of more than 8 rows runs its loop 128 rows of k
an iteration (cc/codegen/cpu/loop_steps.h), so its next step is 128 rows on. Each kernel
also runs, against a float64 reference."""

import re

import jax
import numpy as np
import pytest
from kernel_test_support import (
    assert_float32_product,
    session_kernel_cache,  # noqa: F401 (autouse fixture)
)

import mirage_jax as mj
from mirage_jax.ir.graph import BlockGraph, KernelGraph
from mirage_jax.runtime import compile as runtime_compile

HEADS, K, N, K_TILE = 4, 64, 48, 16


def batched_product(rows: int, heads_per_block: int, k: int = K) -> KernelGraph:
    """y[h] = x[h] @ w[h] for HEADS matrices, `heads_per_block` of them a block, a loop over
    k taking K_TILE rows of each w per step."""
    kg = KernelGraph()
    x = kg.new_input((HEADS, rows, k))
    w = kg.new_input((HEADS, k, N))
    blocks = HEADS // heads_per_block
    bg = BlockGraph(grid=(blocks, 1, 1), forloop_range=k // K_TILE)
    split = (0 if blocks > 1 else -1, -1, -1)
    xb = bg.new_input(x, imap=split, fmap=2)
    wb = bg.new_input(w, imap=split, fmap=1)
    bg.new_output(bg.accum_sum(bg.matmul(xb, wb)), omap=split)
    (y,) = kg.customized([x, w], bg)
    kg.mark_output(y)
    return kg


def b_ahead(source: str) -> set[int]:
    """The prefetch offsets (mj_cpu::matmul's kAhead) of the products in `source`."""
    calls = re.findall(r"mj_cpu::matmul<((?:-?\d+, ){7})(?:true|false)>", source)
    return {int(call.split(", ")[6]) for call in calls}


@pytest.mark.parametrize(
    "rows, heads_per_block, k, ahead",
    [
        (4, 4, K, K * N),  # four matrices a block: the next one's tile
        (8, 2, K, K * N),
        (4, 1, K, K_TILE * N),  # one matrix a block: its next step's tile
        (12, 4, 512, 128 * N),  # more than 8 rows: B is packed, not streamed
    ],
)
def test_prefetch_target_and_result(rows, heads_per_block, k, ahead):
    kg = batched_product(rows, heads_per_block, k)
    assert b_ahead(runtime_compile.generate_code(kg)) == {ahead}
    rng = np.random.default_rng(rows + heads_per_block)
    x = rng.standard_normal((HEADS, rows, k), dtype=np.float32)
    w = rng.standard_normal((HEADS, k, N), dtype=np.float32)
    x[0] *= 1e4  # large partial sums: a step added twice or dropped shows
    w[-1, :, :] = 0.0
    (got,) = jax.jit(mj.compile(kg))(x, w)
    assert_float32_product(got, "hrk,hkn->hrn", x, w, f"{rows} rows, {heads_per_block} heads")

"""The generated CPU matmul's two orders (cc/codegen/cpu/prelude.cc): up to 8 rows stream B
once; more rows pack 128 x 16 strips of B and run 6-row register panels over them. Shapes
with every remainder (rows not a multiple of 6, columns not of 16, k tiles past 128 and not
a multiple of it), in one block and in several that share A (a group product), compiled and
run, against a float64 reference."""

import jax
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)

from mirage_jax.ir.graph import BlockGraph, KernelGraph
from mirage_jax.runtime import compile as runtime_compile


def _matmul(m: int, k: int, n: int, blocks: int, k_tile: int) -> KernelGraph:
    """x[m, k] @ w[k, n]: `blocks` blocks over n, a loop over k in tiles of `k_tile`."""
    kg = KernelGraph()
    x, w = kg.new_input((m, k)), kg.new_input((k, n))
    bg = BlockGraph(grid=(blocks, 1, 1), forloop_range=k // k_tile)
    split = (1 if blocks > 1 else -1, -1, -1)  # the columns over the blocks
    xb = bg.new_input(x, imap=(-1, -1, -1), fmap=1)
    wb = bg.new_input(w, imap=split, fmap=0)
    bg.new_output(bg.accum_sum(bg.matmul(xb, wb)), omap=split)
    (y,) = kg.customized([x, w], bg)
    kg.mark_output(y)
    return kg


@pytest.mark.parametrize(
    "m, k, n, blocks, k_tile",
    [
        (4, 64, 48, 1, 64),  # streaming order
        (8, 300, 40, 2, 150),  # streaming order, the last rows a panel of their own
        (13, 300, 37, 1, 300),  # packed: 2 panels of 6 + 1 row, 2 strips + 5 columns, k 128+128+44
        (64, 256, 96, 2, 128),  # packed, two blocks sharing A
        (9, 130, 33, 1, 130),
    ],
)
def test_generated_matmul_matches_float64(m, k, n, blocks, k_tile):
    kg = _matmul(m, k, n, blocks, k_tile)
    rng = np.random.default_rng(m * 1000 + n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    x[0] *= 1e4  # a row of large values next to ordinary ones
    fn = jax.jit(runtime_compile.compile(kg))
    (got,) = fn(x, w)
    want = x.astype(np.float64) @ w.astype(np.float64)
    err = np.max(np.abs(np.asarray(got, np.float64) - want), axis=1) / np.max(np.abs(want), axis=1)
    assert np.all(err < 1e-5), err

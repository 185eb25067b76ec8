"""Row sums in generated CPU kernels are kept in double and rounded to float once
(cc/codegen/cpu/prelude.cc, row_sum and RowSums): the mean of a row with a large offset over a
small spread (LayerNorm's worst input) is the correctly rounded float32 mean, as XLA's is
here, so the centered values x - mean keep their digits. In float the partial sums grew to the
row's magnitude and the mean of 64 values 1e3 + 1e-2·noise came out 2 ulps off, a 1.5% error
in the normalized values. Each kernel runs against the float64 mean rounded once."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)

import mirage_jax as mj

ROWS = 8


def mean_kernel(length: int, reduce_kind: str = "mean"):
    """The block-level mean (or sum) of each row of x[ROWS, length], rows over 2 blocks."""
    kg = mj.KernelGraph()
    x = kg.new_input((ROWS, length))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    tile = bg.new_input(x, imap=(0, -1, -1), fmap=-1)
    bg.new_output(bg.reduce(tile, 1, reduce_kind), omap=(0, -1, -1))
    (out,) = kg.customized([x], bg)
    kg.mark_output(out)
    return kg


def offset_rows(length: int) -> np.ndarray:
    rng = np.random.default_rng(length)
    x = (1e3 + 1e-2 * rng.standard_normal((ROWS, length))).astype(np.float32)
    x[1] = (-7e4 + rng.standard_normal(length)).astype(np.float32)
    x[2] = np.float32(3.25)  # constant: the mean is exact
    x[3, ::2], x[3, 1::2] = 1e6, -1e6 + 1.0  # cancelling pairs: the sum is length / 2
    return x


# 64: the short rows' batched sums (RowSums); 1024: one row at a time (row_sum); 70: a
# length that leaves a tail past the last full vector.
@pytest.mark.parametrize("length", [64, 70, 1024])
@pytest.mark.parametrize("kind", ["mean", "sum"])
def test_row_sums_round_once(length, kind):
    x = offset_rows(length)
    (got,) = jax.jit(mj.compile(mean_kernel(length, kind)))(jnp.asarray(x))
    exact = x.astype(np.float64).sum(axis=1, keepdims=True)
    if kind == "mean":
        exact /= length
    want = exact.astype(np.float32)
    np.testing.assert_array_equal(np.asarray(got), want)

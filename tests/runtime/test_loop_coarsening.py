"""Generated CPU kernels whose for-loop steps are shorter than their products take per pass
over the accumulator run several steps an iteration (cc/ir/coarsen_loop.h,
cc/codegen/cpu/generate.cc): 4-row steps of a few-row product two at a time, 8-row steps of
a 32-row one sixteen at a time, a row norm accumulated beside the product. Each kernel is
checked to run coarsened, then against float64 on inputs built to break it: rows of 1e17
that cancel, rows of zeros, a NaN and an infinity."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import assert_float32_product, session_kernel_cache  # noqa: F401

import mirage_jax as mj

EPS = 1e-6


def product(rows: int, k: int, cols: int, steps: int) -> mj.KernelGraph:
    """x[rows, k] @ w[k, cols] over 2 blocks of columns, the loop walking k."""
    kg = mj.KernelGraph()
    X = kg.new_input((rows, k))
    W = kg.new_input((k, cols))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=steps)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    bg.new_output(bg.accum_sum(bg.matmul(x, w)), omap=(1, -1, -1))
    (Y,) = kg.customized([X, W], bg)
    kg.mark_output(Y)
    return kg


def norm_linear(rows: int, k: int, cols: int, steps: int) -> mj.KernelGraph:
    """rms_norm(x) * g @ w in one kernel, the norm accumulated beside the product."""
    kg = mj.KernelGraph()
    X = kg.new_input((rows, k))
    G = kg.new_input((k,))
    W = kg.new_input((k, cols))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=steps)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    g = bg.new_input(G, imap=(-1, -1, -1), fmap=0)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    rms = bg.accum_rms_last(x, eps=EPS)
    acc = bg.accum_sum(bg.matmul(bg.mul(x, g), w))
    bg.new_output(bg.div(acc, rms), omap=(1, -1, -1))
    (Y,) = kg.customized([X, G, W], bg)
    kg.mark_output(Y)
    return kg


def hostile(rows: int, k: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(rows * k)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    w = rng.standard_normal((k, cols)).astype(np.float32)
    x[1, ::2], x[1, 1::2] = 1e17, -1e17  # cancelling pairs, each product near 1e34
    x[2] = 0.0
    x[3, 5] = np.nan
    w[7, 3] = np.inf  # every row but the zero one turns that column infinite or NaN
    return x, w


def steps_an_iteration(graph: mj.KernelGraph) -> int:
    found = re.search(r"\((\d+) steps of the searched loop an iteration\)", mj.generate_code(graph))
    return int(found.group(1)) if found else 1


def assert_same_specials(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """NaN and infinities where float64 has them (signs included); the finite mask."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    return np.isfinite(want)


# (rows, k, cols, steps, how many steps an iteration): 4-row steps of 8 rows to 8 rows of k;
# 8-row steps of 32 rows to 128 (two iterations); 4-row steps of 4 rows over a loop of 6.
SHAPES = [(8, 64, 48, 16, 2), (32, 256, 64, 32, 16), (4, 24, 40, 6, 2)]


@pytest.mark.parametrize("rows,k,cols,steps,factor", SHAPES)
def test_a_product_over_short_steps_runs_coarsened_and_exact(rows, k, cols, steps, factor):
    graph = product(rows, k, cols, steps)
    assert steps_an_iteration(graph) == factor
    x, w = hostile(rows, k, cols)
    (got,) = jax.jit(mj.compile(graph))(jnp.asarray(x), jnp.asarray(w))
    got = np.asarray(got)
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64) @ w.astype(np.float64)
    finite = assert_same_specials(got, want)
    # Away from the NaN's row and the infinite weight's column, each element within the
    # float32 bound of any summation order.
    rows_ok = np.all(np.isfinite(x), axis=1)
    columns = np.all(finite[rows_ok], axis=0)
    assert rows_ok.sum() == rows - 1 and columns.sum() == cols - 1
    assert_float32_product(
        got[np.ix_(rows_ok, columns)], "ik,kj->ij", x[rows_ok], w[:, columns], "x @ w"
    )


@pytest.mark.parametrize("rows,k,cols,steps,factor", SHAPES[:2])
def test_a_norm_beside_the_product_runs_coarsened_and_exact(rows, k, cols, steps, factor):
    graph = norm_linear(rows, k, cols, steps)
    assert steps_an_iteration(graph) == factor
    x, w = hostile(rows, k, cols)
    g = np.linspace(-2.0, 2.0, k, dtype=np.float32)
    (got,) = jax.jit(mj.compile(graph))(jnp.asarray(x), jnp.asarray(g), jnp.asarray(w))
    got = np.asarray(got)
    x64 = x.astype(np.float64)
    rms = np.sqrt(np.mean(x64 * x64, axis=1, keepdims=True) + EPS)
    with np.errstate(invalid="ignore"):
        want = (x64 * g) @ w.astype(np.float64) / rms
        scale = np.abs(x64 * g) @ np.abs(w.astype(np.float64)) / rms
        err = np.abs(got - want)
    finite = assert_same_specials(got, want)
    # Normalized rows are O(1): float32 sums of 64-256 terms hold 1e-5 of the row's scale.
    assert np.all(err[finite] <= 1e-5 * (scale[finite] + 1.0)), float(np.max(err[finite]))


def test_a_loop_of_long_enough_steps_is_left_as_it_is():
    assert steps_an_iteration(product(8, 64, 48, 8)) == 1  # 8-row steps
    assert steps_an_iteration(product(32, 256, 64, 2)) == 1  # 128-row steps


def test_finer_cuts_of_k_are_the_same_cpu_code():
    four, eight, sixteen = (product(8, 64, 48, steps) for steps in (16, 8, 4))
    assert four.hash() != eight.hash()
    assert mj._core.cpu_code_hash(four._core) == mj._core.cpu_code_hash(eight._core)
    assert mj._core.cpu_code_hash(sixteen._core) != mj._core.cpu_code_hash(eight._core)

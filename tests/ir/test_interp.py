"""The reference interpreter (KernelGraph.evaluate) against numpy, op by op: every kernel-level
op, then block graphs (tile cutting by imap/fmap, storing by omap, each accumulator), in
float64 and float32."""

import math

import numpy as np
import pytest

import mirage_jax as mj


def evaluate(kg, inputs, dtype):
    outs = kg.evaluate([np.ascontiguousarray(a, dtype=dtype) for a in inputs], dtype=dtype)
    for o in outs:
        assert o.dtype == np.dtype(dtype)
    return outs


def assert_close(actual, expected, rtol):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol)


def kernel_program(shapes, build):
    """A kernel graph over inputs of `shapes`; build(kg, *inputs) returns the output(s)."""
    kg = mj.KernelGraph()
    ins = [kg.new_input(s, "float32") for s in shapes]
    outs = build(kg, *ins)
    for o in outs if isinstance(outs, (list, tuple)) else (outs,):
        kg.mark_output(o)
    return kg


def block_program(shapes, grid, forloop_range, build):
    """One customized op over kernel inputs of `shapes`: build(bg, *kernel_inputs) declares the
    block graph's inputs (in the same order) and outputs."""
    kg = mj.KernelGraph()
    ins = [kg.new_input(s, "float32") for s in shapes]
    bg = mj.BlockGraph(grid=grid, forloop_range=forloop_range)
    build(bg, *ins)
    for o in kg.customized(ins, bg):
        kg.mark_output(o)
    return kg


# ------------------------------------------------------------------------- kernel level


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


UNARY = {
    "exp": np.exp,
    "square": np.square,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": _gelu_tanh,
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "neg": np.negative,
    "recip": lambda x: 1 / x,
}
POSITIVE_ONLY = {"sqrt", "rsqrt", "recip"}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, precision, rng):
    dtype, rtol = precision
    x = rng.uniform(0.5, 2.0, (3, 5)) if name in POSITIVE_ONLY else rng.normal(size=(3, 5))
    kg = kernel_program([x.shape], lambda g, t: getattr(g, name)(t))
    (y,) = evaluate(kg, [x], dtype)
    assert_close(y, UNARY[name](x.astype(dtype).astype(np.float64)), rtol)


@pytest.mark.parametrize(
    "name,c,ref",
    [
        ("mul_scalar", -0.375, lambda x, c: x * c),
        ("add_scalar", 1.25, lambda x, c: x + c),
    ],
)
def test_scalar_ops(name, c, ref, precision, rng):
    dtype, rtol = precision
    x = rng.normal(size=(2, 3, 4))
    kg = kernel_program([x.shape], lambda g, t: getattr(g, name)(t, c))
    (y,) = evaluate(kg, [x], dtype)
    assert_close(y, ref(x.astype(dtype).astype(np.float64), c), rtol)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
BROADCAST_SHAPES = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((4,), (3, 4)),
    ((2, 1, 4), (3, 1)),
    ((1, 4), (3, 1)),
    ((2, 3, 1, 5), (4, 1)),
]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shape_a,shape_b", BROADCAST_SHAPES)
def test_binary_broadcasting(name, shape_a, shape_b, precision, rng):
    dtype, rtol = precision
    a = rng.normal(size=shape_a)
    b = rng.uniform(0.5, 2.0, shape_b) * rng.choice([-1, 1], shape_b)  # no division by ~0
    kg = kernel_program([a.shape, b.shape], lambda g, x, y: getattr(g, name)(x, y))
    (y,) = evaluate(kg, [a, b], dtype)
    expected = BINARY[name](a.astype(dtype).astype(np.float64), b.astype(dtype).astype(np.float64))
    assert y.shape == expected.shape
    assert_close(y, expected, rtol)


@pytest.mark.parametrize(
    "shape_a,shape_b",
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (2, 4, 5)),
        ((1, 3, 4), (2, 4, 5)),  # batch dim broadcast
        ((2, 1, 3, 4), (3, 4, 2)),  # batch dims [2, 1] and [3] broadcast to [2, 3]
    ],
)
def test_matmul(shape_a, shape_b, precision, rng):
    dtype, rtol = precision
    a, b = rng.normal(size=shape_a), rng.normal(size=shape_b)
    kg = kernel_program([a.shape, b.shape], lambda g, x, y: g.matmul(x, y))
    (y,) = evaluate(kg, [a, b], dtype)
    expected = np.matmul(a.astype(dtype).astype(np.float64), b.astype(dtype).astype(np.float64))
    assert y.shape == expected.shape
    assert_close(y, expected, rtol)


REDUCERS = {"sum": np.sum, "mean": np.mean, "max": np.max}


@pytest.mark.parametrize("kind", sorted(REDUCERS))
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_reduce(kind, dim, precision, rng):
    dtype, rtol = precision
    x = rng.normal(size=(2, 3, 4))
    kg = kernel_program([x.shape], lambda g, t: g.reduce(t, dim, kind))
    (y,) = evaluate(kg, [x], dtype)
    expected = REDUCERS[kind](x.astype(dtype).astype(np.float64), axis=dim, keepdims=True)
    assert y.shape == expected.shape
    assert_close(y, expected, rtol)


@pytest.mark.parametrize("eps", [0.0, 1e-6, 0.5])
def test_rms_norm(eps, precision, rng):
    dtype, rtol = precision
    x = rng.normal(size=(2, 3, 8))
    kg = kernel_program([x.shape], lambda g, t: g.rms_norm(t, eps=eps))
    (y,) = evaluate(kg, [x], dtype)
    x64 = x.astype(dtype).astype(np.float64)
    assert_close(y, x64 / np.sqrt(np.mean(x64**2, axis=-1, keepdims=True) + eps), rtol)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_concat(dim, precision, rng):
    dtype, _ = precision
    a = rng.normal(size=(2, 3, 4))
    shape_b = list(a.shape)
    shape_b[dim] = 5
    b = rng.normal(size=shape_b)
    kg = kernel_program([a.shape, b.shape], lambda g, x, y: g.concat(x, y, dim))
    (y,) = evaluate(kg, [a, b], dtype)
    np.testing.assert_array_equal(y, np.concatenate([a, b], axis=dim).astype(dtype))


def test_outputs_in_marked_order_including_an_input(precision, rng):
    dtype, rtol = precision
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    kg = kernel_program([x.shape, w.shape], lambda g, a, b: [g.exp(g.matmul(a, b)), a, g.neg(a)])
    y0, y1, y2 = evaluate(kg, [x, w], dtype)
    x64, w64 = x.astype(dtype).astype(np.float64), w.astype(dtype).astype(np.float64)
    assert_close(y0, np.exp(x64 @ w64), rtol)
    np.testing.assert_array_equal(y1, x.astype(dtype))
    np.testing.assert_array_equal(y2, -x.astype(dtype))


def test_wrong_input_shape_is_an_error():
    kg = kernel_program([(3, 4)], lambda g, t: g.neg(t))
    with pytest.raises(ValueError):
        kg.evaluate([np.zeros((4, 3))])


# -------------------------------------------------------------------------- block level


def test_imap_cuts_and_omap_stores_each_block_tile(precision, rng):
    """Grid (2, 3): axis x splits rows, axis y splits columns; neg(tile) stored back the same
    way reproduces -X exactly, so every block read and wrote its own tile."""
    dtype, _ = precision
    x = rng.normal(size=(4, 6))

    def build(bg, X):
        t = bg.new_input(X, imap=(0, 1, -1), fmap=-1)
        bg.new_output(bg.neg(t), omap=(0, 1, -1))

    (y,) = evaluate(block_program([x.shape], (2, 3, 1), 1, build), [x], dtype)
    np.testing.assert_array_equal(y, -x.astype(dtype))


def test_omap_may_store_along_other_dims_than_imap_read(precision, rng):
    """Block (bx, by) reads the [2, 2] tile at rows 2bx, cols 2by and, with omap (1, 0), stores
    it at cols 2bx, rows 2by of a [6, 4] output: a blockwise transpose of the tile grid."""
    dtype, _ = precision
    x = rng.normal(size=(4, 6))

    def build(bg, X):
        t = bg.new_input(X, imap=(0, 1, -1), fmap=-1)
        bg.new_output(t, omap=(1, 0, -1))

    (y,) = evaluate(block_program([x.shape], (2, 3, 1), 1, build), [x], dtype)
    expected = np.zeros((6, 4))
    for bx in range(2):
        for by in range(3):
            expected[2 * by : 2 * by + 2, 2 * bx : 2 * bx + 2] = x[
                2 * bx : 2 * bx + 2, 2 * by : 2 * by + 2
            ]
    np.testing.assert_array_equal(y, expected.astype(dtype))


def test_third_grid_axis_and_rank4_tiles(precision, rng):
    dtype, _ = precision
    x = rng.normal(size=(2, 4, 3, 6))

    def build(bg, X):
        t = bg.new_input(X, imap=(3, 0, 1), fmap=-1)  # tile [1, 2, 3, 3]
        bg.new_output(bg.mul_scalar(t, 2.0), omap=(3, 0, 1))

    (y,) = evaluate(block_program([x.shape], (2, 2, 2), 1, build), [x], dtype)
    np.testing.assert_array_equal(y, 2 * x.astype(dtype))


def test_fmap_walks_the_dim_over_iterations(precision, rng):
    """accum_sum of the tiles of X[:, i*2:(i+1)*2] over 3 iterations."""
    dtype, rtol = precision
    x = rng.normal(size=(4, 6))

    def build(bg, X):
        t = bg.new_input(X, imap=(0, -1, -1), fmap=1)
        bg.new_output(bg.accum_sum(t), omap=(0, -1, -1))

    (y,) = evaluate(block_program([x.shape], (2, 1, 1), 3, build), [x], dtype)
    assert_close(y, x.reshape(4, 3, 2).sum(axis=1), rtol)


def test_imap_and_fmap_on_the_same_dim_nest(precision, rng):
    """Block b takes columns 6b..6b+5 and iteration i the 2 columns at 6b + 2i (the block's
    part first, the loop inside it)."""
    dtype, rtol = precision
    x = rng.normal(size=(2, 12))

    def build(bg, X):
        t = bg.new_input(X, imap=(1, -1, -1), fmap=1)
        bg.new_output(bg.accum_sum(t), omap=(1, -1, -1))

    (y,) = evaluate(block_program([x.shape], (2, 1, 1), 3, build), [x], dtype)
    expected = x.reshape(2, 2, 3, 2).sum(axis=2).reshape(2, 4)
    assert_close(y, expected, rtol)


def test_replicated_input_and_tiled_matmul(precision, rng):
    """X replicated in every block, W split by columns and both walked over K: the classic
    tiled matmul."""
    dtype, rtol = precision
    x, w = rng.normal(size=(3, 8)), rng.normal(size=(8, 6))

    def build(bg, X, W):
        a = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
        b = bg.new_input(W, imap=(1, -1, -1), fmap=0)
        bg.new_output(bg.accum_sum(bg.matmul(a, b)), omap=(1, -1, -1))

    (y,) = evaluate(block_program([x.shape, w.shape], (3, 1, 1), 4, build), [x, w], dtype)
    assert_close(y, x.astype(dtype).astype(np.float64) @ w.astype(dtype).astype(np.float64), rtol)


# Each accumulator over X[4, 8] with rows split over 2 blocks and columns over 4 iterations:
# numpy formulas of the whole rows.
ACCUMULATORS = {
    "accum_sum": (lambda bg, t: bg.accum_sum(t), lambda x: x.reshape(4, 4, 2).sum(axis=1)),
    "accum_sum_last": (lambda bg, t: bg.accum_sum_last(t), lambda x: x.sum(axis=1, keepdims=True)),
    "accum_mean_last": (
        lambda bg, t: bg.accum_mean_last(t),
        lambda x: x.mean(axis=1, keepdims=True),
    ),
    "accum_rms_last": (
        lambda bg, t: bg.accum_rms_last(t, eps=0.25),
        lambda x: np.sqrt(np.mean(x**2, axis=1, keepdims=True) + 0.25),
    ),
    "accum_max_last": (lambda bg, t: bg.accum_max_last(t), lambda x: x.max(axis=1, keepdims=True)),
    "accum_exp_sum_last": (
        lambda bg, t: bg.accum_exp_sum_last(t),
        lambda x: np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True),
    ),
}


@pytest.mark.parametrize("name", sorted(ACCUMULATORS))
def test_accumulator(name, precision, rng):
    dtype, rtol = precision
    accumulate, reference = ACCUMULATORS[name]
    x = rng.normal(size=(4, 8))

    def build(bg, X):
        t = bg.new_input(X, imap=(0, -1, -1), fmap=1)
        bg.new_output(accumulate(bg, t), omap=(0, -1, -1))

    (y,) = evaluate(block_program([x.shape], (2, 1, 1), 4, build), [x], dtype)
    assert_close(y, reference(x.astype(dtype).astype(np.float64)), rtol)


def test_accum_exp_matmul_is_softmax_numerator(precision, rng):
    """Σ_i exp(s_i − M) @ v_i with M the max of each row over all iterations, and with large
    scores, so an interpreter without the max would overflow."""
    dtype, rtol = precision
    s = rng.normal(size=(4, 8)) * 3 + 60.0
    v = rng.normal(size=(8, 3))

    def build(bg, S, V):
        a = bg.new_input(S, imap=(0, -1, -1), fmap=1)
        b = bg.new_input(V, imap=(-1, -1, -1), fmap=0)
        bg.new_output(bg.accum_exp_matmul(a, b), omap=(0, -1, -1))

    (y,) = evaluate(block_program([s.shape, v.shape], (2, 1, 1), 4, build), [s, v], dtype)
    s64, v64 = s.astype(dtype).astype(np.float64), v.astype(dtype).astype(np.float64)
    assert_close(y, np.exp(s64 - s64.max(axis=1, keepdims=True)) @ v64, rtol)


def test_invariant_input_is_usable_in_the_epilogue(precision, rng):
    """g has fmap -1: the same tile every iteration, usable after the loop."""
    dtype, rtol = precision
    x, g = rng.normal(size=(4, 6)), rng.uniform(1.0, 2.0, (4, 1))

    def build(bg, X, G):
        t = bg.new_input(X, imap=(0, -1, -1), fmap=1)
        d = bg.new_input(G, imap=(0, -1, -1), fmap=-1)
        bg.new_output(bg.div(bg.accum_sum_last(t), d), omap=(0, -1, -1))

    (y,) = evaluate(block_program([x.shape, g.shape], (2, 1, 1), 3, build), [x, g], dtype)
    x64, g64 = x.astype(dtype).astype(np.float64), g.astype(dtype).astype(np.float64)
    assert_close(y, x64.sum(axis=1, keepdims=True) / g64, rtol)


def test_tile_ops_reduce_rms_norm_concat(precision, rng):
    """Ops inside a tile see only the tile: reduce and rms_norm over a [2, 6] row tile,
    concat of two tiles."""
    dtype, rtol = precision
    x, w = rng.normal(size=(4, 6)), rng.normal(size=(4, 3))

    def build(bg, X, W):
        a = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
        b = bg.new_input(W, imap=(0, -1, -1), fmap=-1)
        bg.new_output(bg.concat(bg.rms_norm(a, eps=0.1), b, 1), omap=(0, -1, -1))
        bg.new_output(bg.reduce(a, 1, "max"), omap=(0, -1, -1))
        bg.new_output(bg.reduce(b, 0, "sum"), omap=(0, -1, -1))

    y_cat, y_max, y_colsum = evaluate(
        block_program([x.shape, w.shape], (2, 1, 1), 1, build), [x, w], dtype
    )
    x64, w64 = x.astype(dtype).astype(np.float64), w.astype(dtype).astype(np.float64)
    rn = x64 / np.sqrt(np.mean(x64**2, axis=1, keepdims=True) + 0.1)
    assert_close(y_cat, np.concatenate([rn, w64], axis=1), rtol)
    assert_close(y_max, x64.max(axis=1, keepdims=True), rtol)
    # the sum over the tile's rows only: one row pair per block, stacked by omap
    assert_close(y_colsum, w64.reshape(2, 2, 3).sum(axis=1), rtol)


def test_body_output_when_the_loop_runs_once(precision, rng):
    dtype, rtol = precision
    x = rng.normal(size=(4, 6))

    def build(bg, X):
        t = bg.new_input(X, imap=(1, -1, -1), fmap=0)
        bg.new_output(bg.exp(t), omap=(1, -1, -1))

    (y,) = evaluate(block_program([x.shape], (3, 1, 1), 1, build), [x], dtype)
    assert_close(y, np.exp(x.astype(dtype).astype(np.float64)), rtol)

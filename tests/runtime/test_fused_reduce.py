"""A reduce over a dim other than the last evaluates the elementwise chain that feeds it inside
its own loops (cc/codegen/cpu/kernel_plan.h, reduce_prologue): decode's P @ V as
sum(p * V) over the keys, without writing the product tile to the arena. Each kernel runs
against a float64 numpy reference and the interpreter, on inputs built to break it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    assert_close,
    session_kernel_cache,
    storage_rtol,
)

import mirage_jax as mj

B, S, N, H = 2, 24, 3, 16


def _buffer_declared(source: str, tensor) -> bool:
    return f"t{tensor.id} = arena + " in source or f"* t{tensor.id} = " in source


def _decode_pv(kind: str, grid, forloop: int):
    """out[b, n, h] = reduce over s of p[b, s, n, 0] * v[b, s, n, h] + c[h], split over B
    along the grid and over S along the for-loop (the partial results summed or maxed)."""
    kg = mj.KernelGraph()
    p = kg.new_input((B, S, N, 1))
    v = kg.new_input((B, S, N, H))
    c = kg.new_input((H,))
    bg = mj.BlockGraph(grid=grid, forloop_range=forloop)
    imap = (0 if grid[0] > 1 else -1, -1, -1)
    fmap = 1 if forloop > 1 else -1
    pb = bg.new_input(p, imap=imap, fmap=fmap)
    vb = bg.new_input(v, imap=imap, fmap=fmap)
    cb = bg.new_input(c, imap=(-1, -1, -1), fmap=-1)
    product = bg.add(bg.mul(pb, vb), cb)
    reduced = bg.reduce(product, 1, kind)
    bg.new_output(bg.accum_sum(reduced) if forloop > 1 else reduced, omap=imap)
    (out,) = kg.customized([p, v, c], bg)
    kg.mark_output(out)
    return kg, product


def _hostile_inputs(seed: int):
    rng = np.random.default_rng(seed)
    p = rng.standard_normal((B, S, N, 1))
    v = rng.standard_normal((B, S, N, H))
    v[0, :, 0, :] *= 1e30  # huge terms that must not overflow a partial sum to inf
    v[1, 3, 1, 2] = np.inf  # an inf in one column only
    v[1, 5, 2, 7] = np.nan  # a NaN in one column only
    p[0, :, 2, 0] = 0.0  # a zero row of weights
    return [jnp.asarray(x, jnp.float32) for x in (p, v, rng.standard_normal(H))]


def _reduced(kind: str, terms, dim: int):
    """The reduce of float64 `terms` along `dim` (kept), and the scale of its float32
    rounding error: the sum (mean) of the terms' magnitudes for a sum (mean), the result's
    own magnitude for a max."""
    with np.errstate(invalid="ignore", over="ignore"):
        want = {"sum": terms.sum, "mean": terms.mean, "max": terms.max}[kind](dim, keepdims=True)
        magnitude = {"sum": np.abs(terms).sum, "mean": np.abs(terms).mean}.get(kind)
        scale = np.abs(want) if magnitude is None else magnitude(dim, keepdims=True)
    return want, scale


def _assert_close_to(got, want, scale, what: str) -> None:
    """|got - want| <= storage_rtol * scale on the finite results: per element, so that the
    1e30 terms of one row hide no error in the others."""
    finite = np.isfinite(want)
    err = np.abs(got[finite] - want[finite])
    bound = storage_rtol("float32") * scale[finite]
    worst = int(np.argmax(err - bound))
    assert err[worst] <= bound[worst], (
        f"{what}: {got[finite][worst]}, expected {want[finite][worst]} "
        f"(scale {scale[finite][worst]})"
    )


def _reference(kind: str, inputs):
    p, v, c = (np.asarray(x, np.float64) for x in inputs)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = p * v + c
    return _reduced(kind, terms, 1)


# A mean per for-loop tile summed over the loop is not the mean: no mean with a for-loop.
@pytest.mark.parametrize(
    "kind, grid, forloop",
    [
        ("sum", (1, 1, 1), 1),
        ("sum", (2, 1, 1), 1),
        ("sum", (2, 1, 1), 4),
        ("mean", (1, 1, 1), 1),
        ("mean", (2, 1, 1), 1),
    ],
)
def test_chain_evaluated_inside_the_reduce(kind, grid, forloop):
    kg, product = _decode_pv(kind, grid, forloop)
    source = mj.generate_code(kg)
    assert not _buffer_declared(source, product), "the product tile still has a buffer"
    inputs = _hostile_inputs(seed=3)
    (got,) = jax.jit(mj.compile(kg))(*inputs)
    got = np.asarray(got, np.float64)
    want, scale = _reference(kind, inputs)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN in other places"
    assert np.array_equal(np.isposinf(got), np.isposinf(want)), "inf in other places"
    _assert_close_to(got, want, scale, f"{kind} vs numpy")
    (interpreted,) = kg.evaluate(inputs)
    assert np.array_equal(np.isnan(got), np.isnan(interpreted))


def test_max_over_the_keys_keeps_minus_inf_and_nan():
    kg, product = _decode_pv("max", (2, 1, 1), 1)
    assert not _buffer_declared(mj.generate_code(kg), product)
    p, v, c = (np.asarray(x, np.float64) for x in _hostile_inputs(seed=4))
    p[0, :, 1, 0] = np.abs(p[0, :, 1, 0]) + 0.1
    v[0, :, 1, :] = -np.inf  # every term of this column is -inf: so is its max
    inputs = [jnp.asarray(x, jnp.float32) for x in (p, v, c)]
    (got,) = jax.jit(mj.compile(kg))(*inputs)
    got = np.asarray(got, np.float64)
    assert np.all(got[0, 0, 1] == -np.inf), got[0, 0, 1]
    want, scale = _reference("max", inputs)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN in other places"
    (interpreted,) = kg.evaluate(inputs)
    assert np.array_equal(np.isnan(got), np.isnan(interpreted))
    finite = np.isfinite(want)
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    _assert_close_to(got, want, scale, "max vs numpy")


def test_a_chain_read_twice_keeps_its_buffer():
    # The product is both reduced and stored: it must exist as a tile, and the reduce reads it.
    kg = mj.KernelGraph()
    x = kg.new_input((4, 8, 16))
    bg = mj.BlockGraph(grid=(2, 1, 1))
    xb = bg.new_input(x, imap=(0, -1, -1), fmap=-1)
    squared = bg.square(xb)
    bg.new_output(bg.reduce(squared, 1, "sum"), omap=(0, -1, -1))
    bg.new_output(squared, omap=(0, -1, -1))
    outs = kg.customized([x], bg)
    for t in outs:
        kg.mark_output(t)
    assert _buffer_declared(mj.generate_code(kg), squared)
    data = np.random.default_rng(5).standard_normal((4, 8, 16)).astype(np.float32)
    total, stored = jax.jit(mj.compile(kg))(jnp.asarray(data))
    want = np.asarray(data, np.float64) ** 2
    assert_close(stored, want, storage_rtol("float32"), "stored square")
    assert_close(total, want.sum(1, keepdims=True), storage_rtol("float32"), "sum of squares")


def _decode_scores(kind: str, grid, h: int = H):
    """out[b, s, n] = reduce over h of q[b, 0, n, h] * k[b, s, n, h] * scale[h] (a row
    operand of lower rank), split over B along the grid."""
    kg = mj.KernelGraph()
    q = kg.new_input((B, 1, N, h))
    k = kg.new_input((B, S, N, h))
    scale = kg.new_input((h,))
    bg = mj.BlockGraph(grid=grid)
    imap = (0 if grid[0] > 1 else -1, -1, -1)
    qb = bg.new_input(q, imap=imap, fmap=-1)
    kb = bg.new_input(k, imap=imap, fmap=-1)
    sb = bg.new_input(scale, imap=(-1, -1, -1), fmap=-1)
    product = bg.mul(bg.mul(qb, kb), sb)
    bg.new_output(bg.reduce(product, 3, kind), omap=imap)
    (out,) = kg.customized([q, k, scale], bg)
    kg.mark_output(out)
    return kg, product


# Rows of 16 (one vector) and of 37 (two vectors and a tail); 72 or 144 rows per block, so
# the short rows' batched lane sums (mj_cpu::RowSums) also end on a partial batch.
@pytest.mark.parametrize("kind", ["sum", "mean", "max"])
@pytest.mark.parametrize("grid", [(1, 1, 1), (2, 1, 1)])
@pytest.mark.parametrize("h", [H, 37])
def test_chain_computed_into_a_stack_row_for_a_last_dim_reduce(kind, grid, h):
    kg, product = _decode_scores(kind, grid, h)
    source = mj.generate_code(kg)
    assert not _buffer_declared(source, product)
    assert ("sums.add(row" in source) == (kind != "max"), "short rows' sums not batched"
    rng = np.random.default_rng(7)
    q = rng.standard_normal((B, 1, N, h))
    k = rng.standard_normal((B, S, N, h))
    k[0, 2, :, :] *= 1e30  # a huge row
    k[1, 4, 0, 3] = np.nan
    k[1, 6, 2, 5] = -np.inf
    q[0, 0, 1, :] = 0.0  # a zero query head: its row of a huge key is exactly 0
    scale = np.abs(rng.standard_normal(h)) + 0.5
    inputs = [jnp.asarray(x, jnp.float32) for x in (q, k, scale)]
    (got,) = jax.jit(mj.compile(kg))(*inputs)
    got = np.asarray(got, np.float64)
    q, k, scale = (np.asarray(x, np.float64) for x in inputs)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = q * k * scale
    want, magnitude = _reduced(kind, terms, 3)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN in other places"
    infinite = np.isinf(want)
    assert np.array_equal(got[infinite], want[infinite]), "infinities differ"
    _assert_close_to(got, want, magnitude, f"{kind} vs numpy")


def test_a_last_dim_reduce_of_a_long_row_keeps_its_pass():
    # A row longer than the stack row (4096 floats) is computed into its tile as before.
    kg = mj.KernelGraph()
    x = kg.new_input((4, 4160))
    bg = mj.BlockGraph(grid=(2, 1, 1))
    xb = bg.new_input(x, imap=(0, -1, -1), fmap=-1)
    squared = bg.square(xb)
    bg.new_output(bg.reduce(squared, 1, "sum"), omap=(0, -1, -1))
    (out,) = kg.customized([x], bg)
    kg.mark_output(out)
    assert _buffer_declared(mj.generate_code(kg), squared)
    data = np.random.default_rng(6).standard_normal((4, 4160)).astype(np.float32)
    (got,) = jax.jit(mj.compile(kg))(jnp.asarray(data))
    want = (np.asarray(data, np.float64) ** 2).sum(1, keepdims=True)
    assert_close(got, want, storage_rtol("float32"), "sum of squares")


G = 2  # query heads per KV head


def _decode_pv_outer(grid, forloop: int, dtype: str = "float32"):
    """out[b, 0, n, g, h] = sum over s of p[b, s, n, g, 0] @ v[b, s, n, 0, h]: decode's P @ V
    as the search writes it, a matmul over a k of 1 per key summed over the keys."""
    kg = mj.KernelGraph()
    p = kg.new_input((B, S, N, G, 1), dtype)
    v = kg.new_input((B, S, N, 1, H), dtype)
    bg = mj.BlockGraph(grid=grid, forloop_range=forloop)
    imap = (0 if grid[0] > 1 else -1, -1, -1)
    fmap = 1 if forloop > 1 else -1
    product = bg.matmul(
        bg.new_input(p, imap=imap, fmap=fmap), bg.new_input(v, imap=imap, fmap=fmap)
    )
    reduced = bg.reduce(product, 1, "sum")
    bg.new_output(bg.accum_sum(reduced) if forloop > 1 else reduced, omap=imap)
    (out,) = kg.customized([p, v], bg)
    kg.mark_output(out)
    return kg, product


def _hostile_pv(seed: int, dtype):
    rng = np.random.default_rng(seed)
    p = rng.standard_normal((B, S, N, G, 1))
    v = rng.standard_normal((B, S, N, 1, H))
    v[0, :, 0, :, :] *= 1e30  # huge terms that must not overflow a partial sum to inf
    v[1, 3, 1, 0, 2] = np.inf
    v[1, 5, 2, 0, 7] = np.nan
    p[0, :, 2, 1, 0] = 0.0  # a zero row of probabilities (a fully masked head)
    return [jnp.asarray(x, dtype) for x in (p, v)]


@pytest.mark.parametrize("grid, forloop", [((1, 1, 1), 1), ((2, 1, 1), 1), ((2, 1, 1), 4)])
def test_an_outer_product_is_evaluated_inside_the_reduce(grid, forloop):
    kg, product = _decode_pv_outer(grid, forloop)
    source = mj.generate_code(kg)
    assert not _buffer_declared(source, product), "the outer product still has a buffer"
    assert "alignas(64) float row[" in source, "the sums over the keys are not kept in a row"
    inputs = _hostile_pv(seed=8, dtype=jnp.float32)
    (got,) = jax.jit(mj.compile(kg))(*inputs)
    got = np.asarray(got, np.float64)
    p, v = (np.asarray(x, np.float64) for x in inputs)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = p @ v
    want, scale = _reduced("sum", terms, 1)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN in other places"
    assert np.array_equal(np.isposinf(got), np.isposinf(want)), "inf in other places"
    _assert_close_to(got, want, scale, "P @ V vs numpy")
    (interpreted,) = kg.evaluate(inputs)
    assert np.array_equal(np.isnan(got), np.isnan(interpreted))


def test_a_bfloat16_outer_product_read_in_place_keeps_its_buffer():
    # A bfloat16 tile that only matmuls read is read where it lies, as raw bfloat16 that the
    # matmul widens on load: an elementwise read of it would take its bits for floats.
    kg, product = _decode_pv_outer((2, 1, 1), 1, "bfloat16")
    source = mj.generate_code(kg)
    assert _buffer_declared(source, product) and "mj_cpu::Bf16" in source
    inputs = _hostile_pv(seed=9, dtype=jnp.bfloat16)
    (got,) = jax.jit(mj.compile(kg))(*inputs)
    got = np.asarray(got.astype(jnp.float32), np.float64)
    p, v = (np.asarray(x.astype(jnp.float32), np.float64) for x in inputs)
    with np.errstate(invalid="ignore", over="ignore"):
        want, scale = _reduced("sum", p @ v, 1)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN in other places"
    finite = np.isfinite(want)
    err = np.abs(got[finite] - want[finite])
    assert np.all(err <= storage_rtol("bfloat16") * (scale[finite] + np.abs(want[finite])))


@pytest.mark.parametrize(
    "shape",
    [
        (B, S, 1, 1),  # no kept dim longer than 1 after the reduced one: nothing to hold
        (2, 3, 4160),  # a kept row longer than the stack row (4096 floats)
    ],
)
def test_an_inner_reduce_without_a_stack_row_folds_into_its_result(shape):
    # The reduce over dim 1 folds each value straight into its result tile, as before the
    # stack rows; the chain is still evaluated inside the reduce's loops.
    kg = mj.KernelGraph()
    x = kg.new_input(shape)
    y = kg.new_input(shape)
    bg = mj.BlockGraph(grid=(2, 1, 1))
    xb = bg.new_input(x, imap=(0, -1, -1), fmap=-1)
    yb = bg.new_input(y, imap=(0, -1, -1), fmap=-1)
    product = bg.mul(xb, yb)
    bg.new_output(bg.reduce(product, 1, "sum"), omap=(0, -1, -1))
    (out,) = kg.customized([x, y], bg)
    kg.mark_output(out)
    source = mj.generate_code(kg)
    assert not _buffer_declared(source, product)
    assert "float row[" not in source
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal(shape), rng.standard_normal(shape)
    a[0, 1] *= 1e30  # huge terms in one result element's sum only
    inputs = [jnp.asarray(v, jnp.float32) for v in (a, b)]
    (got,) = jax.jit(mj.compile(kg))(*inputs)
    terms = np.asarray(inputs[0], np.float64) * np.asarray(inputs[1], np.float64)
    want, scale = _reduced("sum", terms, 1)
    _assert_close_to(np.asarray(got, np.float64), want, scale, "inner sum vs numpy")


def _decode_dots(kind: str, grid, h: int, q_width: int, dtype: str = "float32"):
    """out[b, s, n] = reduce over h of q[b, 0, n, :q_width] * k[b, s, n, h]: a dot product
    of two rows when q_width == h, a row scaled by one q value when q_width == 1."""
    kg = mj.KernelGraph()
    q = kg.new_input((B, 1, N, q_width), dtype)
    k = kg.new_input((B, S, N, h), dtype)
    bg = mj.BlockGraph(grid=grid)
    imap = (0 if grid[0] > 1 else -1, -1, -1)
    product = bg.mul(bg.new_input(q, imap=imap, fmap=-1), bg.new_input(k, imap=imap, fmap=-1))
    bg.new_output(bg.reduce(product, 3, kind), omap=imap)
    (out,) = kg.customized([q, k], bg)
    kg.mark_output(out)
    return kg


# Rows of 16, 37 (two vectors and a tail) and 64 (decode's head_dim).
@pytest.mark.parametrize("kind", ["sum", "mean"])
@pytest.mark.parametrize("grid", [(1, 1, 1), (2, 1, 1)])
@pytest.mark.parametrize("h", [H, 37, 64])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_product_of_two_rows_is_summed_as_a_dot_product(kind, grid, h, dtype):
    kg = _decode_dots(kind, grid, h, q_width=h, dtype=dtype)
    source = mj.generate_code(kg)
    assert "sums.add_dot(" in source and "sums.add(row" not in source, "no dot product"
    rng = np.random.default_rng(11)
    q = rng.standard_normal((B, 1, N, h))
    k = rng.standard_normal((B, S, N, h))
    k[0, 2, :, :] *= 1e30  # a huge key row
    k[1, 4, 0, 3] = np.nan
    k[1, 6, 2, 5] = -np.inf
    q[0, 0, 1, :] = 0.0  # a zero query head: its dot with the huge key is exactly 0
    inputs = [jnp.asarray(x, dtype) for x in (q, k)]
    (got,) = jax.jit(mj.compile(kg))(*inputs)
    got = np.asarray(got, np.float64)
    q, k = (np.asarray(x, np.float64) for x in inputs)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = q * k
    want, magnitude = _reduced(kind, terms, 3)
    if dtype != "float32":  # the results are stored in bfloat16: its rounding of each
        with np.errstate(invalid="ignore", over="ignore"):
            magnitude = magnitude + np.abs(want) * storage_rtol(dtype) / storage_rtol("float32")
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN in other places"
    infinite = np.isinf(want)
    assert np.array_equal(got[infinite], want[infinite]), "infinities differ"
    assert np.all(got[0, :, 1] == 0.0), "a zero query's dots are not exactly 0"
    _assert_close_to(got, want, magnitude, f"{kind} vs numpy")
    (interpreted,) = kg.evaluate(inputs)
    assert np.array_equal(np.isnan(got), np.isnan(interpreted))


def test_a_row_scaled_by_one_value_is_no_dot_product():
    kg = _decode_dots("sum", (2, 1, 1), H, q_width=1)
    source = mj.generate_code(kg)
    assert "sums.add_dot(" not in source and "sums.add(row" in source
    rng = np.random.default_rng(12)
    inputs = [
        jnp.asarray(rng.standard_normal(s), jnp.float32) for s in ((B, 1, N, 1), (B, S, N, H))
    ]
    (got,) = jax.jit(mj.compile(kg))(*inputs)
    q, k = (np.asarray(x, np.float64) for x in inputs)
    want, magnitude = _reduced("sum", q * k, 3)
    _assert_close_to(np.asarray(got, np.float64), want, magnitude, "scaled rows vs numpy")

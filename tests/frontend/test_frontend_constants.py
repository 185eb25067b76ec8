"""Constants in the frontend: literals keep their jaxpr dtypes, scalar arithmetic on literals
is folded by jax (jnp.var's `n - ddof`), constants fold as IEEE arithmetic does (x/0 is inf,
0/0 is nan, never a Python exception), and a region that would need a constant no kernel can
hold is refused with a reason. Also what the frontend admits: no PRNG keys, no float64, no
rank above 4, no empty tensors."""

from __future__ import annotations

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mirage_jax.frontend import (
    Lit,
    RegionNotSupported,
    Var,
    flatten,
    partition,
    primitives,
    region_to_graph,
)

RNG = np.random.default_rng(0)
X = jnp.asarray(RNG.standard_normal((4, 8)), jnp.float32)
W = jnp.asarray(RNG.standard_normal((8, 6)), jnp.float32)


def _regions(f, *args):
    return partition(jax.make_jaxpr(f)(*args)).regions


def _graph_matches_jax(region, values) -> None:
    """The region's KernelGraph, run by the float64 interpreter, computes what jax does."""
    rg = region_to_graph(region)
    want = region.evaluate(*values)
    got = rg.finish_outputs(
        rg.graph.evaluate(rg.prepare_inputs([np.asarray(v) for v in values]), dtype="float64")
    )
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)


def _eqx_layer_norm(x):
    return jax.vmap(eqx.nn.LayerNorm(8))(x)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: jnp.var(x, -1, keepdims=True),
        lambda x: jnp.var(x, -1, ddof=1),
        lambda x: jnp.std(x, -1),
        lambda x: (
            (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(jnp.var(x, -1, keepdims=True) + 1e-5)
        ),
        _eqx_layer_norm,
    ],
    ids=["var", "var_ddof1", "std", "layer_norm_var", "equinox_layer_norm"],
)
def test_regions_computing_var_convert(f):
    """jnp.var divides by `n - ddof` computed from an int literal and guards with `n - ddof >
    0`: both fold to literals, so the region's outputs are tensors, not constants (it used to
    be refused: "output ... is a constant")."""
    regions = _regions(f, X)
    assert regions
    for region in regions:
        values = [X if v.shape == X.shape else jnp.ones(v.shape, v.dtype) for v in region.inputs]
        _graph_matches_jax(region, values)


def test_literals_keep_their_jaxpr_dtype():
    """A weakly typed literal (jnp.var's ddof 0, an added 2.0) is a Python scalar in the
    jaxpr; numpy alone would make it int64/float64, which jax then refuses to mix with float32
    under jax_enable_x64."""
    prog = flatten(jax.make_jaxpr(lambda x: jnp.var(x + 2.0, -1))(X))
    lits = [v for n in prog.nodes for v in n.invars if isinstance(v, Lit)]
    assert lits and all(v.dtype in (np.float32, np.int32, np.bool_) for v in lits), lits


def test_scalar_arithmetic_on_literals_is_folded():
    prog = flatten(jax.make_jaxpr(lambda x: jnp.var(x, -1))(X))
    scalar_nodes = [n for n in prog.nodes if all(len(v.shape) == 0 for v in n.outvars)]
    assert scalar_nodes == [], scalar_nodes
    (select,) = [n for n in prog.nodes if n.name == "select_n"]
    assert isinstance(select.invars[0], Lit) and bool(select.invars[0].value)


def test_effects_and_callbacks_are_not_folded():
    def f(x):
        jax.debug.print("{}", 1.0)
        return x + jax.pure_callback(lambda: np.float32(2), jax.ShapeDtypeStruct((), jnp.float32))

    names = [n.name for n in flatten(jax.make_jaxpr(f)(X)).nodes]
    assert {"debug_callback", "debug_print"} & set(names) and "pure_callback" in names


@pytest.mark.parametrize(
    "f",
    [lambda x, w: (x @ w) / 0.0, lambda x, w: jnp.sum(x @ w, -1) / 0.0],
    ids=["matmul_div0", "sum_div0"],
)
def test_division_by_zero_is_refused_not_raised(f):
    """x/0 is ±inf or nan, a constant no kernel holds: refused with that reason (it raised
    ZeroDivisionError)."""
    (region,) = _regions(f, X, W)
    with pytest.raises(RegionNotSupported, match=r"div: by 0\.0"):
        region_to_graph(region)


def test_non_finite_folded_constants_are_refused():
    """0/0 folds to nan (it folded to inf), and nan cannot become a kernel constant."""

    def f(x, w):
        return jnp.sum(x @ w, -1) + jnp.full((4,), 0.0) / 0.0

    (region,) = _regions(f, X, W)
    with pytest.raises(RegionNotSupported, match="nan"):
        region_to_graph(region)


def test_division_by_a_constant_with_a_subnormal_reciprocal_is_refused():
    (region,) = _regions(lambda x, w: (x @ w) / 1e38, X, W)
    with pytest.raises(RegionNotSupported, match="reciprocal"):
        region_to_graph(region)


def _out(dtype) -> Var:
    return Var(0, (), dtype)


@pytest.mark.parametrize(
    ("f", "a", "b", "want"),
    [
        (np.divide, 1.0, 0.0, np.inf),
        (np.divide, -1.0, 0.0, -np.inf),
        (np.divide, 1.0, -0.0, -np.inf),
        (np.divide, 0.0, 0.0, np.nan),
        (np.subtract, np.inf, np.inf, np.nan),
        (np.multiply, 1e30, 1e30, np.inf),  # overflows float32
    ],
)
def test_fold_is_ieee_in_the_result_dtype(f, a, b, want):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = primitives.fold(f, _out(np.float32), a, b)
    np.testing.assert_equal(got, want)


def test_fold_rounds_to_the_result_dtype():
    got = primitives.fold(np.divide, _out(jnp.bfloat16), 1.0, 3.0)
    assert got == float(jnp.bfloat16(1.0) / jnp.bfloat16(3.0))


def test_unary_folds_do_not_raise_or_warn():
    def f(x, w):
        c = jnp.full((6,), -1.0)
        return jnp.sum(x @ w, -1)[:, None] * jnp.sqrt(c)  # sqrt(-1) is nan

    (region,) = _regions(f, X, W)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RegionNotSupported, match="nan"):
            region_to_graph(region)


def test_prng_keys_pass_through():
    """A typed PRNG key (dtype key<fry>, which numpy has no dtype for) is a value of the
    program that no region takes (it raised TypeError: Cannot interpret 'key<fry>')."""

    def f(key, x, w):
        keep = jax.random.bernoulli(key, 0.5, (4, 6))
        return jnp.where(keep, jax.nn.softmax(x @ w, -1), 0.0)

    part = partition(jax.make_jaxpr(f)(jax.random.key(0), X, W))
    assert part.regions
    keys = [v for v in part.program.invars if jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key)]
    assert len(keys) == 1
    assert all(keys[0] not in r.inputs for r in part.regions)


@pytest.mark.parametrize(
    ("f", "args", "reason"),
    [
        (lambda x, w: jnp.sum(x @ w, -1), (jnp.ones((0, 8)), W), "no elements"),
        (lambda x: jnp.sum(x * x, -1), (jnp.ones((4, 8), jnp.complex64),), "complex64"),
    ],
    ids=["zero_size", "complex"],
)
def test_what_no_kernel_takes_stays_out_of_regions(f, args, reason):
    """Those nodes are left to plain JAX at partitioning, so no region is made only to fail
    (and warn) at conversion."""
    part = partition(jax.make_jaxpr(f)(*args))
    assert any(reason in r for r in part.unsupported.values()), part.unsupported
    for region in part.regions:
        region_to_graph(region)


@pytest.mark.parametrize(
    ("f", "args"),
    [
        (lambda x: jnp.sum(jnp.exp(x), -1), (jnp.ones((2, 2, 2, 2, 3)),)),
        (lambda x, w: jnp.sum(x.astype(jnp.float32) @ w, -1), (jnp.ones((4, 8), int), W)),
    ],
    ids=["rank5", "int_input"],
)
def test_what_xla_lays_out_before_the_kernel_converts(f, args):
    """A rank-5 value folds its leading dims onto one kernel axis, and an int input is
    converted to float32 by XLA before the kernel (frontend/layout.py): every tensor of the
    kernel graph is a float of rank <= 4."""
    (region,) = partition(jax.make_jaxpr(f)(*args)).regions
    rg = region_to_graph(region)
    for t in rg.graph.inputs:
        assert t.dtype == "float32" and len(t.shape) <= 4, (t.dtype, t.shape)


def test_float64_stays_out_of_regions():
    with jax.enable_x64(True):
        x = jnp.ones((4, 8), jnp.float64)
        part = partition(jax.make_jaxpr(lambda a: jnp.sum(jnp.exp(a), -1))(x))
    assert part.regions == []
    assert any("float64" in r for r in part.unsupported.values())


def test_equinox_layer_norm_is_one_region():
    """Equinox clamps the variance with jnp.maximum(0, var): a variance (a mean of squares)
    is >= 0 or NaN, so the max is the variance itself and joins the region (it split the
    LayerNorm in two regions: "max: only max(-inf, x)")."""
    (region,) = _regions(lambda x, w: _eqx_layer_norm(x) @ w, X, W)
    assert "max" in [n.name for n in region.nodes]
    _graph_matches_jax(region, [X] + [jnp.ones(v.shape) for v in region.inputs[1:]])


@pytest.mark.parametrize(
    "clamped",
    [
        lambda x: jnp.mean(x * x, -1, keepdims=True) - jnp.square(jnp.mean(x, -1, keepdims=True)),
        lambda x: jnp.sqrt(jnp.var(x, -1, keepdims=True)) * -1.0,
        lambda x: jnp.sum(x, -1, keepdims=True),
    ],
    ids=["flax_fast_variance", "negated", "sum"],
)
def test_max_with_zero_of_a_value_of_any_sign_is_a_relu(clamped):
    """flax's E[x^2] - E[x]^2 may round below 0: its clamp is real, and stays in the region
    as a relu (it was left out, cutting flax's LayerNorm from its matmul)."""

    def f(x):
        return x * jax.lax.rsqrt(jnp.maximum(0.0, clamped(x)) + 1e-3)

    x = X.at[1].set(3.0)  # a constant row: the one-pass variance is 0 or rounds below it
    part = partition(jax.make_jaxpr(f)(x))
    assert not part.unsupported, part.unsupported
    (region,) = part.regions
    assert "relu" in str(region_to_graph(region).graph)
    _graph_matches_jax(region, [x])

"""mirage_jax.optimize never fails where jax.jit runs: a failure anywhere in converting or
rewriting a region makes the function run as jax.jit, with one warning; jax.jit's own
arguments (donation) and the programs models write (dropout with a typed PRNG key, division
of a matmul by zero) behave as under jax.jit."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from optimize_test_support import rmsnorm_linear

import mirage_jax as mj
from mirage_jax.rewrite import budget, control_flow, region

RNG = np.random.default_rng(0)
X = jnp.asarray(RNG.standard_normal((4, 16)), jnp.float32)
G = jnp.asarray(RNG.standard_normal(16), jnp.float32)
W = jnp.asarray(RNG.standard_normal((16, 8)), jnp.float32)
CONFIG = mj.SearchConfig(max_kernel_ops=1, max_block_ops=3, time_budget_s=2, max_verified=1)


def _called(f, *args):
    """(f's result, the mirage_jax warnings of the call)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jax.block_until_ready(f(*args))
    return out, [str(w.message) for w in caught if "mirage_jax" in str(w.message)]


def _boom(*args, **kwargs):
    raise ValueError("a bug in the converter")


@pytest.mark.parametrize(
    ("module", "name", "words"),
    [
        (region, "region_to_graph", "converting it to a μGraph failed: ValueError"),
        (region, "superoptimize", "superoptimize failed: ValueError"),
        (control_flow, "partition", "not rewritten: ValueError"),  # the function's own
    ],
    ids=["conversion", "search", "partition"],
)
def test_a_failure_anywhere_runs_as_jax_jit_with_one_warning(
    monkeypatch, tmp_path, module, name, words
):
    monkeypatch.setattr(module, name, _boom)
    # A region this small gains too little to be searched on a fast machine: make it worth
    # a search, so that the failing step is reached.
    monkeypatch.setattr(
        budget, "estimate", lambda kg, flops, backend, cold=False: budget.Estimate(1e-3, 0.0)
    )
    region.forget()
    f = mj.optimize(rmsnorm_linear, config=CONFIG, cache_dir=tmp_path)
    got, warned = _called(f, X, G, W)
    np.testing.assert_array_equal(got, jax.jit(rmsnorm_linear)(X, G, W))
    assert len(warned) == 1 and words in warned[0], warned


@pytest.mark.parametrize(
    "fn",
    [lambda x, w: (x @ w) / 0.0, lambda x, w: jnp.sum(x @ w, -1) / 0.0],
    ids=["matmul_div0", "sum_div0"],
)
def test_division_by_zero_gives_jax_jits_infinities(tmp_path, fn):
    """It raised ZeroDivisionError from the frontend; now the region runs as XLA."""
    x = X.at[0, :].set(0.0)  # a row of zeros: 0/0 is nan there
    got, warned = _called(mj.optimize(fn, config=CONFIG, cache_dir=tmp_path), x, W)
    want = jax.jit(fn)(x, W)
    np.testing.assert_array_equal(got, want)
    assert np.isinf(np.asarray(want)).any() and np.isnan(np.asarray(want)).any()
    assert len(warned) == 1 and "div: by 0.0" in warned[0], warned


def test_dropout_with_a_typed_key(tmp_path):
    """A key<fry> value in the trace raised TypeError: Cannot interpret 'key<fry>'."""

    def f(key, x, w):
        keep = jax.random.bernoulli(key, 0.5, (4, 8))
        return jnp.where(keep, jax.nn.softmax(x @ w, -1) / 0.5, 0.0), jax.random.split(key)

    key = jax.random.key(3)
    got, _ = _called(mj.optimize(f, config=CONFIG, cache_dir=tmp_path), key, X, W)
    want = jax.jit(f)(key, X, W)
    np.testing.assert_allclose(got[0], want[0], rtol=2e-5, atol=1e-6)
    np.testing.assert_array_equal(jax.random.key_data(got[1]), jax.random.key_data(want[1]))


def test_donated_arguments_as_jax_jit(tmp_path):
    def f(x, g, w):
        return rmsnorm_linear(x, g, w), x + 1.0

    got = mj.optimize(f, config=CONFIG, cache_dir=tmp_path, donate_argnums=0)
    want = jax.jit(f, donate_argnums=0)
    x1, x2 = X + 0.0, X + 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "some donated buffers were not usable", as jax.jit
        a, b = got(x1, G, W), want(x2, G, W)
    np.testing.assert_allclose(a[0], b[0], rtol=2e-5, atol=1e-6)
    np.testing.assert_array_equal(a[1], b[1])
    assert x1.is_deleted() == x2.is_deleted()
    by_name = mj.optimize(f, config=CONFIG, cache_dir=tmp_path, donate_argnames="x")
    np.testing.assert_array_equal(by_name(X + 0.0, G, W)[1], b[1])


@pytest.mark.parametrize("bad", [np.generic, np.exceptions.ComplexWarning])
def test_callables_without_a_signature_fail_as_under_jax_jit(bad):
    """Classes passed as the function: jax.jit's exception, word for word (optimize raised
    its own ValueError or TypeError)."""

    def outcome(fn):
        try:
            fn(X)
        except Exception as e:
            return type(e), str(e)
        return None

    want = outcome(jax.jit(bad))
    assert want is not None
    assert outcome(mj.optimize(bad)) == want


def test_static_and_keyword_arguments_and_none_leaves(tmp_path):
    def f(x, w, *, n, extra=None, pair=(None, 2.0)):
        y = jax.nn.softmax(x @ w, -1) * pair[1]
        return {"y": y[:, :n], "none": extra, "sum": jnp.sum(y, -1)}

    opt = mj.optimize(f, config=CONFIG, cache_dir=tmp_path, static_argnames="n")
    want = jax.jit(f, static_argnames="n")
    for n in (3, 5):
        got = opt(X, W, n=n, pair=(None, jnp.float32(3.0)))
        ref = want(X, W, n=n, pair=(None, jnp.float32(3.0)))
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(ref)
        assert got["none"] is None and got["y"].shape == (4, n)
        np.testing.assert_allclose(got["y"], ref["y"], rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(got["sum"], ref["sum"], rtol=2e-5, atol=1e-6)

"""@mirage_jax.optimize on real jax functions: the result equals jax.jit's, regions that win
run as generated kernels (custom calls in the HLO), and regions that cannot be optimized run
as plain JAX with one warning."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import inputs, kernels_always_win, normwise, rmsnorm_linear  # noqa: F401

import mirage_jax as mj
from mirage_jax.runtime import profile as _profile


def test_a_winning_region_runs_as_a_custom_call_and_matches_jit(kernels_always_win):
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    got = f(x, g, w)
    assert normwise(got, jax.jit(rmsnorm_linear)(x, g, w)) < 1e-5
    hlo = jax.jit(f).lower(x, g, w).as_text()
    assert "custom_call" in hlo and "mj_cpu_" in hlo
    explained = f.explain(x, g, w)
    assert "kernel" in explained and "dot_general" in explained
    # same signature: no new specialization; new data: still right
    x2, g2, w2 = inputs(1)
    assert normwise(f(x2, g2, w2), jax.jit(rmsnorm_linear)(x2, g2, w2)) < 1e-5
    assert len(f._specializations) == 1


def test_pytrees_kwargs_and_untouched_parts(kernels_always_win):
    @mj.optimize
    def model(params, x, *, scale):
        h = rmsnorm_linear(jnp.sin(x), params["g"], params["w"])  # sin stays plain JAX
        return {"out": h * scale, "aux": (x.sum(),)}

    x, g, w = inputs()
    params = {"g": g, "w": w}
    got = model(params, x, scale=2.0)
    want = jax.jit(lambda p, x: model.__wrapped__(p, x, scale=2.0))(params, x)
    assert normwise(got["out"], want["out"]) < 1e-5
    assert normwise(got["aux"][0], want["aux"][0]) < 1e-5


def test_without_a_win_the_function_runs_as_plain_jax(monkeypatch):
    monkeypatch.setattr(
        _profile,
        "median_times",
        lambda functions, args, **_: ({n: (0.5 if n == "xla" else 1.0) for n in functions}, 1),
    )
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    assert normwise(f(x, g, w), jax.jit(rmsnorm_linear)(x, g, w)) < 1e-6
    assert "custom_call" not in jax.jit(f).lower(x, g, w).as_text()
    assert "no candidate beat XLA" in f.explain(x, g, w)


def test_a_region_that_cannot_be_expressed_warns_once_and_runs_as_jax():
    def f(x, w):
        # a sum over alternate dims of a rank-5 input: no kernel layout of rank <= 4 holds
        # the reduced and the kept dims on axes of their own
        return jnp.sum(x, axis=(0, 2, 4)) @ w

    x = jnp.ones((2, 3, 2, 3, 2))
    w = jnp.ones((3, 4))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        opt = mj.optimize(f)
        got = opt(x, w)
    np.testing.assert_allclose(got, jax.jit(f)(x, w))
    messages = [str(w.message) for w in record if "mirage_jax.optimize" in str(w.message)]
    assert len(messages) == 1 and "not expressible as a μGraph" in messages[0]
    assert "xla" in opt.explain(x, w)


def test_backend_xla_does_no_rewriting_and_bad_backends_are_named():
    f = mj.optimize(rmsnorm_linear, backend="xla")
    x, g, w = inputs()
    assert normwise(f(x, g, w), jax.jit(rmsnorm_linear)(x, g, w)) < 1e-6
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        mj.optimize(rmsnorm_linear, backend="tpu")


def test_wrong_shapes_get_jax_errors(kernels_always_win):
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    with pytest.raises(TypeError):
        f(x, g, w[:10])

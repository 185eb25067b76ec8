"""The test-only switch $MIRAGE_JAX_KEEP_KERNELS=1: the rewritten program runs its generated
kernels whatever the timing says, so correctness tests exercise the kernels themselves."""

import jax
import jax.numpy as jnp
import numpy as np

import mirage_jax as mj


def _rmsnorm_linear(x, g, w):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return (x * jax.lax.rsqrt(ms + 1e-6) * g) @ w


def test_kernels_kept_and_correct(monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((4, 64)), jnp.float32)
    g = jnp.asarray(rng.standard_normal((64,)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((64, 32)), jnp.float32)
    f = mj.optimize(
        _rmsnorm_linear,
        cache_dir=tmp_path,
        config=mj.SearchConfig(max_kernel_ops=1, max_block_ops=6, time_budget_s=30, max_verified=4),
    )
    got = f(x, g, w)
    assert f.uses_kernels(x, g, w)
    hlo = jax.jit(f).lower(x, g, w).as_text()
    assert "custom_call" in hlo
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(jax.jit(_rmsnorm_linear)(x, g, w)), rtol=2e-5, atol=2e-5
    )


def test_switch_off_by_default(monkeypatch):
    from mirage_jax.superopt.superoptimize import keep_kernels

    monkeypatch.delenv("MIRAGE_JAX_KEEP_KERNELS", raising=False)
    assert not keep_kernels()
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    assert keep_kernels()

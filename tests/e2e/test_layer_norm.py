"""LayerNorm as Equinox writes it (jnp.var, then jnp.maximum(0, var)) followed by a Linear,
under mirage_jax.optimize with kernels kept: one region, converted, run by a generated
kernel, and equal to jax.jit on inputs built to break a normalization (a large offset over a
small spread, a constant row whose variance is exactly 0). It used to be refused ("output
... is a constant") and then split in two regions at the max."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import mirage_jax as mj


def test_equinox_layer_norm_linear_runs_kernels(monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    x[1] = 1e3 + 1e-2 * x[1]  # catastrophic cancellation in E[x^2] - E[x]^2
    x[2] = 5.0  # variance 0: rsqrt(eps)
    x[3] *= 1e4
    w = jnp.asarray(rng.standard_normal((64, 32)), jnp.float32)
    norm = eqx.nn.LayerNorm(64)

    def f(x, w):
        return jax.vmap(norm)(x) @ w

    opt = mj.optimize(
        f,
        cache_dir=tmp_path,
        config=mj.SearchConfig(
            max_kernel_ops=1, max_block_ops=3, time_budget_s=2, max_verified=2, threads=1
        ),
    )
    got = opt(jnp.asarray(x), w)
    (region,) = opt.regions(jnp.asarray(x), w)
    assert region.chosen == "kernel", region.reason
    assert opt.uses_kernels(jnp.asarray(x), w)
    want = jax.jit(f)(jnp.asarray(x), w)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)

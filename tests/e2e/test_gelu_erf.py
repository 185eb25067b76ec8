"""Dense -> GELU in its exact (erf) form -> Dense, as BERT/ViT-style Flax code writes it
(`nn.gelu(approximate=False)`, whose jaxpr holds lax.erfc) and as the formula
0.5·x·(1 + erf(x/√2)) writes it (lax.erf), on a rank-3 activation, under mirage_jax.optimize
with kernels kept: the GELU no longer cuts the region, the one region runs generated code, and
the result equals jax.jit's in float32 and bfloat16 on standard-normal inputs and on inputs
built to break it (±1e4 scale, zeros, NaN and inf rows)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mirage_jax as mj

CONFIG = mj.SearchConfig(
    max_kernel_ops=1, max_block_ops=3, time_budget_s=2, max_verified=2, threads=1
)


class ExactGeluMlp(nn.Module):
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(64, dtype=self.dtype, param_dtype=self.dtype)(x)
        h = nn.gelu(h, approximate=False)
        return nn.Dense(32, dtype=self.dtype, param_dtype=self.dtype)(h)


def erf_formula_mlp(x, w1, w2):
    h = x @ w1
    return (0.5 * h * (1.0 + jax.lax.erf(h / np.sqrt(2.0).astype(h.dtype)))) @ w2


def adversarial(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x[0, 1] *= 1e4  # GELU's saturated ends: x and -0
    x[0, 2] *= -1e4
    x[1, 0] = 0.0
    x[1, 3, 5] = np.nan
    x[1, 4, 7] = np.inf
    x[1, 5, 9] = -np.inf
    return x


def check(opt, f, args, dtype, what):
    regions = opt.regions(*args)
    with_erf = [r for r in regions if {"erf", "erfc"} & set(r.primitives)]
    assert len(with_erf) == 1, [(r.chosen, r.reason, r.primitives) for r in regions]
    (region,) = with_erf
    assert region.chosen == "kernel", region.reason
    assert region.primitives.count("dot_general") == 2, region.primitives  # not cut at erf
    assert opt.uses_kernels(*args)
    got = np.asarray(opt(*args), np.float64)
    want = np.asarray(jax.jit(f)(*args), np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN")
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=f"{what}: inf")
    tol = 2e-2 if dtype == jnp.bfloat16 else 1e-4
    scale = np.abs(want[finite]).max()
    np.testing.assert_allclose(got[finite], want[finite], rtol=tol, atol=tol * scale, err_msg=what)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16], ids=["f32", "bf16"])
def test_flax_exact_gelu_mlp_runs_in_one_kernel_region(dtype, monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    rng = np.random.default_rng(0)
    model = ExactGeluMlp(dtype=dtype)
    x = rng.standard_normal((2, 8, 32)).astype(np.float32)
    params = model.init(jax.random.PRNGKey(0), jnp.asarray(x, dtype))

    def f(params, x):
        return model.apply(params, x)

    opt = mj.optimize(f, cache_dir=tmp_path, config=CONFIG)
    for what, data in (("normal", x), ("adversarial", adversarial(x))):
        check(opt, f, (params, jnp.asarray(data, dtype)), dtype, f"{dtype.__name__} {what}")


def test_erf_formula_mlp_runs_in_one_kernel_region(monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8, 32)).astype(np.float32)
    w1 = jnp.asarray(rng.standard_normal((32, 64)) / 6, jnp.float32)
    w2 = jnp.asarray(rng.standard_normal((64, 32)) / 8, jnp.float32)
    opt = mj.optimize(erf_formula_mlp, cache_dir=tmp_path, config=CONFIG)
    for what, data in (("normal", x), ("adversarial", adversarial(x))):
        check(opt, erf_formula_mlp, (jnp.asarray(data), w1, w2), jnp.float32, what)

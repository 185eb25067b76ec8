"""Helpers shared by the tests of @mirage_jax.optimize: a small RMSNorm+Linear function and
its inputs, the normwise error, and a fixture that makes every kernel win the timing."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mirage_jax.runtime import profile as _profile


def rmsnorm_linear(x, g, w):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return (x * jax.lax.rsqrt(ms + 1e-6) * g) @ w


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return (
        jnp.asarray(rng.standard_normal((8, 256)), jnp.float32),
        jnp.asarray(rng.standard_normal(256), jnp.float32),
        jnp.asarray(rng.standard_normal((256, 64)), jnp.float32),
    )


def normwise(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


@pytest.fixture
def kernels_always_win(monkeypatch):
    """Timing decides between a kernel and XLA; these tests are about the rewriting, so every
    candidate is made to time faster than XLA (correctness checks still run for real)."""

    def fake(functions, args, **_):
        return {name: (1.0 if name == "xla" else 0.5) for name in functions}, 1

    monkeypatch.setattr(_profile, "median_times", fake)

"""Layers stacked as Flax users stack them, under `nn.scan` (linen) and `nnx.scan` over
`nnx.vmap`-made blocks (nnx): optimize finds the layer's regions inside the scan body and
runs their kernels there (kept whatever the timing: $MIRAGE_JAX_KEEP_KERNELS=1), with
outputs equal to jax.jit's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import normwise

import mirage_jax as mj

nn = pytest.importorskip("flax.linen", reason="needs flax (the 'flax' extra)")
nnx = pytest.importorskip("flax.nnx", reason="needs flax (the 'flax' extra)")

REL = 1e-5  # float32, normwise
X = jnp.asarray(np.random.default_rng(0).standard_normal((2, 8, 64)), jnp.float32)


def kernel_calls(fn, *args) -> int:
    return jax.jit(fn).lower(*args).as_text().count("mirage_jax_cpu")


class LinenBlock(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        h = nn.LayerNorm()(x)
        return x + nn.Dense(64)(nn.gelu(nn.Dense(256)(h))), None


class LinenStack(nn.Module):
    @nn.compact
    def __call__(self, x):
        blocks = nn.scan(
            LinenBlock, variable_axes={"params": 0}, split_rngs={"params": True}, length=3
        )
        return blocks()(x, None)[0]


class NnxBlock(nnx.Module):
    def __init__(self, rngs):
        self.norm = nnx.RMSNorm(64, rngs=rngs)
        self.up = nnx.Linear(64, 128, rngs=rngs)
        self.down = nnx.Linear(128, 64, rngs=rngs)

    def __call__(self, x):
        return x + self.down(nnx.silu(self.up(self.norm(x))))


def test_linen_nn_scan_runs_its_layer_kernels(monkeypatch):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    model = LinenStack()
    params = model.init(jax.random.key(0), X)
    f = mj.optimize(model.apply)
    assert normwise(f(params, X), jax.jit(model.apply)(params, X)) < REL
    assert f.uses_kernels(params, X) and kernel_calls(f, params, X) >= 1
    assert all("in the scan body at" in r.reason for r in f.regions(params, X))


def test_nnx_scan_runs_its_layer_kernels(monkeypatch):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")

    @nnx.vmap(in_axes=0, out_axes=0)
    def make(key):
        return NnxBlock(nnx.Rngs(key))

    graphdef, state = nnx.split(make(jax.random.split(jax.random.key(1), 3)))

    def forward(state, x):
        @nnx.scan(in_axes=(0, nnx.Carry), out_axes=nnx.Carry)
        def run(block, x):
            return block(x)

        return run(nnx.merge(graphdef, state), x)

    f = mj.optimize(forward)
    assert normwise(f(state, X), jax.jit(forward)(state, X)) < REL
    assert f.uses_kernels(state, X) and kernel_calls(f, state, X) >= 1
    assert all("in the scan body at" in r.reason for r in f.regions(state, X))

"""A decode step's P @ V against a KV cache held as [B, S, N, H] (mirage_jax/frontend/dot.py,
vector_product): one query's attention weights are a vector, so the dot becomes a broadcast
product summed over the keys, reading the cache in the order it is stored (as a matmul it
would be copied into [B, N, S, H] at every call). The region's KernelGraph, run by the float64
interpreter, computes what jax computes. A prefill's P @ V (several queries) stays a matmul, and
so does a decode's against a cache a matmul reads without a copy ([B, N, H, S])."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mirage_jax.frontend import partition, region_to_graph
from mirage_jax.frontend.flat import run_nodes

B, N, S, H = 2, 3, 16, 8


def pv(p, v):
    return jnp.einsum("bnqk,bknh->bqnh", p, v)


def pv_time_major_cache(p, v_sbnh):
    """A cache held time-major, [S, B, N, H], transposed by the model: the product follows
    the stored order."""
    return jnp.einsum("bnqk,bknh->bqnh", p, jnp.transpose(v_sbnh, (1, 0, 2, 3)))


def _region_graph(f, *args):
    part = partition(jax.make_jaxpr(f)(*args))
    (region,) = part.regions
    env = dict(part.program.consts)
    env.update(zip(part.program.invars, args))
    run_nodes(part.program.nodes, env)
    return region, region_to_graph(region), [env[v] for v in region.inputs]


def _check(region, rg, values):
    want = region.evaluate(*values)
    got = rg.finish_outputs(rg.graph.evaluate(rg.prepare_inputs(values)), values)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("f,cache_shape", [(pv, (B, S, N, H)), (pv_time_major_cache, (S, B, N, H))])
def test_decode_pv_reads_the_cache_as_stored(f, cache_shape):
    rng = np.random.default_rng(0)
    p = jax.nn.softmax(rng.standard_normal((B, N, 1, S)).astype(np.float32), axis=-1)
    v = rng.standard_normal(cache_shape).astype(np.float32)
    region, rg, values = _region_graph(f, p, v)
    kinds = [op.kind for op in rg.graph.ops]
    assert "matmul" not in kinds and "mul" in kinds and "reduce" in kinds, kinds
    # only the weights are laid out (B·N·S elements); the cache is read where it lies
    assert rg.copies <= p.size, rg.layout_ops()
    _check(region, rg, values)


def test_a_cache_a_matmul_reads_as_stored_stays_a_matmul():
    rng = np.random.default_rng(2)
    p = jax.nn.softmax(rng.standard_normal((B, N, 1, S)).astype(np.float32), axis=-1)
    v = rng.standard_normal((B, N, H, S)).astype(np.float32)
    region, rg, values = _region_graph(lambda p, v: jnp.einsum("bnqk,bnhk->bqnh", p, v), p, v)
    assert "matmul" in [op.kind for op in rg.graph.ops] and rg.copies == 0
    _check(region, rg, values)


def test_prefill_pv_stays_a_matmul():
    rng = np.random.default_rng(1)
    p = jax.nn.softmax(rng.standard_normal((B, N, 4, S)).astype(np.float32), axis=-1)
    v = rng.standard_normal((B, S, N, H)).astype(np.float32)
    region, rg, values = _region_graph(pv, p, v)
    assert "matmul" in [op.kind for op in rg.graph.ops]
    _check(region, rg, values)

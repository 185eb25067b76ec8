"""A decode step's P @ V against a KV cache held as [B, S, N, H] (mirage_jax/frontend/dot.py,
vector_product): one query's attention weights are a vector, so the dot becomes a broadcast
product summed over the keys, reading the cache in the order it is stored (as a matmul it
would be copied into [B, N, S, H] at every call). Grouped-query attention's query holds a group
of heads per KV head ([B, T, K, G, H]): the group gets one more axis, which the cache
broadcasts along, so its product is rank 5. The region's KernelGraph, run by the float64
interpreter, computes what jax computes. A prefill's P @ V (several queries) stays a matmul, and
so does a decode's against a cache a matmul reads without a copy ([B, N, H, S]). Decode scores
against a cache held [B, K, S, H] are a product too: a matmul reads that cache as stored only
with the keys on its rows, and the softmax after it wants them on the last axis."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mirage_jax.frontend import dot, partition, region_to_graph
from mirage_jax.frontend.flat import run_nodes

B, N, S, H = 2, 3, 16, 8
K, G = 2, 4  # KV heads, query heads per KV head
SG, HG = 64, 16  # a cache long enough that copying it costs more than laying out the rest


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


def gqa_scores(q, k):
    return jnp.einsum("btkgh,bskh->bkgts", q, k) * HG**-0.5


def gqa_pv(p, v):
    return jnp.einsum("bkgts,bskh->btkgh", p, v)


def gqa_attention(q, k, v, mask):
    """Scores, an additive mask over the keys, softmax and P @ V, as a Llama-style decode
    step writes them: two regions (scores + softmax, P @ V), neither copying the cache."""
    s = gqa_scores(q, k) + mask[:, None, None, None, :]
    return gqa_pv(jax.nn.softmax(s, axis=-1), v)


def _gqa_inputs(rng, t=1):
    q = rng.standard_normal((B, t, K, G, HG)).astype(np.float32)
    k = (4 * rng.standard_normal((B, SG, K, HG))).astype(np.float32)  # large logits
    v = rng.standard_normal((B, SG, K, HG)).astype(np.float32)
    mask = np.zeros((B, SG), np.float32)
    mask[0, SG // 2 :] = -1e9  # a padded row: half its keys masked
    return q, k, v, mask


@pytest.mark.parametrize("f,operands", [(gqa_scores, "qk"), (gqa_pv, "pv")])
def test_grouped_query_decode_reads_the_cache_as_stored(f, operands):
    q, k, v, _ = _gqa_inputs(np.random.default_rng(3))
    p = np.asarray(jax.nn.softmax(gqa_scores(q, k), axis=-1))
    args = (q, k) if operands == "qk" else (p, v)
    region, rg, values = _region_graph(f, *args)
    kinds = [op.kind for op in rg.graph.ops]
    assert "matmul" not in kinds and "mul" in kinds and "reduce" in kinds, kinds
    product = next(op for op in rg.graph.ops if op.kind == "mul")
    assert len(product.outputs[0].shape) == 5, rg.graph  # [B, S, K, G, H]
    # at most the small operand and the result are laid out; the cache is read where it lies
    assert rg.copies <= args[0].size + np.prod(region.outputs[0].shape), rg.layout_ops()
    _check(region, rg, values)


def _program_regions(f, *args):
    """Each region of f's program with its graph and its input values."""
    part = partition(jax.make_jaxpr(f)(*args))
    env = dict(part.program.consts)
    env.update(zip(part.program.invars, args))
    run_nodes(part.program.nodes, env)
    assert part.regions
    return [(r, region_to_graph(r), [env[x] for x in r.inputs]) for r in part.regions]


def test_grouped_query_decode_attention_regions():
    q, k, v, mask = _gqa_inputs(np.random.default_rng(4))
    for region, rg, values in _program_regions(gqa_attention, q, k, v, mask):
        assert "matmul" not in [op.kind for op in rg.graph.ops], rg.graph
        assert rg.copies < k.size, rg.layout_ops()
        _check(region, rg, values)


@pytest.mark.parametrize("group", [dot.VECTOR_FREE, 2 * dot.VECTOR_FREE])
def test_a_query_group_wider_than_vector_free_stays_a_matmul(group):
    """A group of more than VECTOR_FREE query heads is a matmul's rows: a product would
    re-read the cache tile once per head. Head dim 64 against the group makes copying the
    cache cost more than the vector's layout, so only the limit decides (a prefill's several
    queries are matmuls by that cost alone)."""
    rng = np.random.default_rng(5)
    # small integers: float32 sums them exactly, whatever the order
    q = rng.integers(-2, 3, (B, 1, K, group, 64)).astype(np.float32)
    k = rng.integers(-2, 3, (B, SG, K, 64)).astype(np.float32)
    region, rg, values = _region_graph(lambda q, k: jnp.einsum("btkgh,bskh->bkgts", q, k), q, k)
    kinds = [op.kind for op in rg.graph.ops]
    assert ("matmul" in kinds) == (group > dot.VECTOR_FREE), kinds
    _check(region, rg, values)


def heads_major_attention(q, k, v, mask):
    """Decode attention as the paper's programs write it (benchmarks/programs.py): the cache
    held [B, K, S, H], the G query heads of a group folded into rows, softmax over the keys.
    A matmul could read K as stored only with the keys on the scores' rows; the softmax wants
    them on the last axis, which as a matmul copies all of K at every call."""
    s = jnp.einsum("bkgh,bksh->bkgs", q, k) * HG**-0.5 + mask[:, None, None, :]
    return jnp.einsum("bkgs,bksh->bkgh", jax.nn.softmax(s, axis=-1), v)


def test_heads_major_decode_scores_do_not_copy_the_cache():
    rng = np.random.default_rng(6)
    q = rng.standard_normal((B, K, G, HG)).astype(np.float32)
    k = (4 * rng.standard_normal((B, K, SG, HG))).astype(np.float32)  # large logits
    v = rng.standard_normal((B, K, SG, HG)).astype(np.float32)
    mask = np.zeros((B, SG), np.float32)
    mask[1, 3:] = -1e9  # a padded row: all but three keys masked
    for region, rg, values in _program_regions(heads_major_attention, q, k, v, mask):
        # the scores, probabilities and output at most; never K or V
        assert rg.copies < k.size, rg.layout_ops()
        _check(region, rg, values)

"""Chains of dependent matmuls are cut apart before regions grow
(mirage_jax/frontend/chains.py): a transformer layer's o_proj, RMSNorm + gated MLP and down
projection become three regions (each a fusion the search can find), the cut falling after
each matmul's elementwise epilogue (residual, silu · up, GELU). Attention (P @ V reads Q @ K^T
only through exp) and LoRA's rank-r product stay whole, and every region still computes what
jax does."""

import jax
import jax.numpy as jnp
import numpy as np

from mirage_jax.frontend import dot, partition, region_to_graph
from mirage_jax.frontend.chains import MIN_CHAIN_K
from mirage_jax.frontend.flat import run_nodes

HIDDEN, FFN, ROWS = 256, 512, 4


def _rand(rng, *shape):
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


def _regions(f, *args):
    part = partition(jax.make_jaxpr(f)(*args))
    for region in part.regions:  # each converts and computes what jax does
        rg = region_to_graph(region)
        values = _region_inputs(part, region, args)
        want = [np.asarray(w) for w in region.evaluate(*values)]
        got = rg.finish_outputs(rg.graph.evaluate(rg.prepare_inputs(values)), values)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)
    return [r.primitives for r in part.regions]


def _region_inputs(part, region, args):
    env = dict(part.program.consts)
    env.update(zip(part.program.invars, args))
    run_nodes(part.program.nodes, env)
    return [env[v] for v in region.inputs]


def layer_tail(x, attn, wo, g, w_gate, w_up, w_down):
    h = x + attn @ wo
    normed = h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-6) * g
    return h + (jax.nn.silu(normed @ w_gate) * (normed @ w_up)) @ w_down


def test_a_layer_tail_is_cut_into_its_three_fusions():
    rng = np.random.default_rng(0)
    args = (
        _rand(rng, ROWS, HIDDEN),
        _rand(rng, ROWS, HIDDEN),
        _rand(rng, HIDDEN, HIDDEN),
        _rand(rng, HIDDEN),
        _rand(rng, HIDDEN, FFN),
        _rand(rng, HIDDEN, FFN),
        _rand(rng, FFN, HIDDEN),
    )
    o_proj, mlp, down = _regions(layer_tail, *args)
    assert o_proj.count("dot_general") == 1 and "add" in o_proj and "rsqrt" not in o_proj
    # the norm goes with the matmuls it feeds: RMSNorm + gated MLP, the paper's fusion
    assert mlp.count("dot_general") == 2 and "rsqrt" in mlp and "logistic" in mlp
    assert down.count("dot_general") == 1 and "add" in down


def gelu_mlp(x, w_fc, b_fc, w_proj):
    return x + jax.nn.gelu(x @ w_fc + b_fc) @ w_proj


def test_the_cut_falls_after_the_epilogue():
    rng = np.random.default_rng(1)
    args = (
        _rand(rng, ROWS, HIDDEN),
        _rand(rng, HIDDEN, FFN),
        _rand(rng, FFN),
        _rand(rng, FFN, HIDDEN),
    )
    fc, proj = _regions(gelu_mlp, *args)
    assert "tanh" in fc and "add" in fc  # bias and GELU in the first matmul's region
    assert proj.count("dot_general") == 1 and "tanh" not in proj


def attention(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[-1])
    return jax.nn.softmax(s, axis=-1) @ v


def test_attention_stays_whole():
    rng = np.random.default_rng(2)
    seq = 2 * MIN_CHAIN_K  # P @ V contracts over more than MIN_CHAIN_K keys
    # A prefill's block of queries: up to VECTOR_FREE query rows, the scores are a product
    # that reads K as stored, and P @ V a region of its own (test_frontend_vector_product.py).
    rows = 2 * dot.VECTOR_FREE
    args = (_rand(rng, rows, 64), _rand(rng, seq, 64), _rand(rng, seq, 64))
    (whole,) = _regions(attention, *args)
    assert whole.count("dot_general") == 2 and "exp" in whole


def lora(x, w, a, b):
    return x @ w + (x @ a) @ b


def test_a_low_rank_product_stays_whole():
    rng = np.random.default_rng(3)
    rank = 16
    assert rank < MIN_CHAIN_K
    args = (_rand(rng, ROWS, HIDDEN), _rand(rng, HIDDEN, HIDDEN), _rand(rng, HIDDEN, rank))
    args += (_rand(rng, rank, HIDDEN),)
    (whole,) = _regions(lora, *args)
    assert whole.count("dot_general") == 3

"""Matmuls and attention as models write them (rank-3 activations, [out, in] weights,
[B, T, N, H] einsums, grouped-query attention by reshape or by repeat, soft-capping, decode
rows of one token): every dot_general lands in a region that converts, and every region's
KernelGraph, run by the float64 interpreter, computes what jax computes for its nodes."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mirage_jax.frontend import partition, region_to_graph
from mirage_jax.frontend.flat import run_nodes

B, T, S, K, G, H, D = 2, 4, 4, 2, 2, 8, 16  # batch, queries, keys, kv heads, group, head, model


def _attention_bnts(q, k, v, bias):
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(H) + bias
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)


def gqa_by_reshape(x, wq, wk, wv, bias):
    q = (x @ wq).reshape(B, T, K, G, H)
    k = (x @ wk).reshape(B, S, K, H)
    v = (x @ wv).reshape(B, S, K, H)
    scores = jnp.einsum("btkgh,bskh->bkgts", q, k) * (1.0 / math.sqrt(H)) + bias[:, :, None]
    p = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("bkgts,bskh->btkgh", p, v).reshape(B, T, K * G * H)


def gqa_by_repeat(x, wq, wk, wv, bias):
    q = (x @ wq).reshape(B, T, K * G, H)
    k = jnp.repeat((x @ wk).reshape(B, S, K, H), G, axis=2)
    v = jnp.repeat((x @ wv).reshape(B, S, K, H), G, axis=2)
    return _attention_bnts(q, k, v, bias).reshape(B, T, K * G * H)


def soft_capped(x, wq, wk, wv, bias):
    q = (x @ wq).reshape(B, T, K * G, H)
    k = (x @ wk).reshape(B, S, K, H).repeat(G, axis=2)
    scores = jnp.einsum("btnh,bsnh->bnts", q, k)
    scores = jnp.tanh(scores / 30.0) * 30.0 + bias
    return jax.nn.softmax(scores, axis=-1).sum(axis=1)


def out_in_weights(x, wq, wk, wv, bias):
    # a [out, in] weight (torch-style) and a one-token decode row
    w = wq.T  # [K*G*H, D]
    return jax.nn.silu(x[:, -1:, :] @ w.T) @ w


PATTERNS = [gqa_by_reshape, gqa_by_repeat, soft_capped, out_in_weights]


def _inputs(seed):
    rng = np.random.default_rng(seed)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    causal = np.tril(np.ones((T, S), bool))
    bias = np.where(causal, 0.0, -1e9).astype(np.float32)[None, None]
    bias = np.broadcast_to(bias, (B, 1, T, S)).copy()  # heads broadcast
    return (r(B, T, D), r(D, K * G * H) / 4, r(D, K * H) / 4, r(D, K * H), bias)


@pytest.mark.parametrize("f", PATTERNS, ids=lambda f: f.__name__)
def test_every_matmul_converts_and_computes_the_same(f):
    args = _inputs(0)
    part = partition(jax.make_jaxpr(f)(*args))
    env = dict(part.program.consts)
    env.update(zip(part.program.invars, args))
    run_nodes(part.program.nodes, env)
    inside = {n.index for r in part.regions for n in r.nodes}
    dots = [n for n in part.program.nodes if n.name == "dot_general"]
    assert dots and all(n.index in inside for n in dots), part.unsupported
    for region in part.regions:
        values = [env[v] for v in region.inputs]
        rg = region_to_graph(region)
        want = region.evaluate(*values)
        got = rg.finish_outputs(rg.graph.evaluate(rg.prepare_inputs(values)), values)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, np.asarray(w), rtol=2e-4, atol=2e-5)
    got = part.program.evaluate(*args)[0]
    np.testing.assert_allclose(got, jax.jit(f)(*args), rtol=1e-5, atol=1e-5)

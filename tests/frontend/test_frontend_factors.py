"""Which dims of a region may be split across devices (mirage_jax.frontend.factors), and the
region rewritten for per-shard shapes: run on a slice of its inputs, it computes the same
slice of its outputs as the whole region."""

import jax
import jax.numpy as jnp
import numpy as np

from mirage_jax.frontend import partition
from mirage_jax.frontend.factors import localize, region_factors


def rmsnorm_linear(x, g, w):
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return (x * jax.lax.rsqrt(ms + 1e-6) * g) @ w


def only_region(f, *args):
    (region,) = partition(jax.make_jaxpr(f)(*args)).regions
    return region


def test_rows_and_columns_split_the_reduced_dim_does_not():
    rng = np.random.default_rng(0)
    x, g, w = (rng.standard_normal(s).astype(np.float32) for s in ((8, 64), (64,), (64, 32)))
    region = only_region(rmsnorm_linear, x, g, w)
    factors, why = region_factors(region)
    assert factors is not None, why
    (rows, k), (gk,), (wk, cols) = (factors.of(v) for v in region.inputs)
    assert k == gk == wk and not factors.splittable(k)  # the norm's and the matmul's K
    assert factors.splittable(rows) and factors.splittable(cols) and rows != cols
    assert factors.of(region.outputs[0]) == (rows, cols)

    # 2 row shards x 4 column shards: each shard's region computes its block of the output
    local = localize(region, factors, {rows: 2, cols: 4})
    assert [v.shape for v in local.inputs] == [(4, 64), (64,), (64, 8)]
    want = np.asarray(region.evaluate(x, g, w)[0])
    for i in range(2):
        for j in range(4):
            (got,) = local.evaluate(x[4 * i : 4 * i + 4], g, w[:, 8 * j : 8 * j + 8])
            np.testing.assert_allclose(
                got, want[4 * i : 4 * i + 4, 8 * j : 8 * j + 8], rtol=1e-5, atol=1e-6
            )


def test_a_factor_on_two_dims_of_one_value_stays_whole():
    """x + norm(x) @ W with W square: the residual ties W's output dim to x's dim, which the
    norm and the matmul reduce over, so W's two dims share one factor: it must stay whole (a
    sharding rule cannot name one factor twice in a tensor; the region failed to lower)."""
    rng = np.random.default_rng(2)
    x, g, w = (rng.standard_normal(s).astype(np.float32) for s in ((8, 64), (64,), (64, 64)))
    region = only_region(lambda x, g, w: x + rmsnorm_linear(x, g, w), x, g, w)
    factors, why = region_factors(region)
    assert factors is not None, why
    (rows, k), _, (wk, wn) = (factors.of(v) for v in region.inputs)
    assert wk == wn == k and not factors.splittable(k)
    assert factors.splittable(rows)

    # s + s^T ties the rows of a square s to its columns, a factor nothing reduces over:
    # still whole
    square = x[:, :8]
    region = only_region(lambda s, v: (s + s.T) * jnp.sum(v, -1, keepdims=True), square, x)
    factors, why = region_factors(region)
    assert factors is not None, why
    (rows, cols), (v_rows, _) = (factors.of(v) for v in region.inputs)
    assert rows == cols == v_rows and not factors.splittable(rows)


def test_attention_heads_split_and_its_softmax_row_does_not():
    def attention(q, k, v):
        s = jnp.einsum("hqd,hkd->hqk", q, k) * 0.125
        return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)

    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((4, 8, 16)).astype(np.float32) for _ in range(3))
    region = only_region(attention, q, k, v)
    factors, why = region_factors(region)
    assert factors is not None, why
    (hq, sq, dq), (hk, sk, dk), (hv, sv, dv) = (factors.of(x) for x in region.inputs)
    assert hq == hk == hv and factors.splittable(hq)  # heads
    assert factors.splittable(sq)  # query rows
    assert sk == sv and not factors.splittable(sk)  # the softmax's and the PV matmul's keys
    assert dq == dk and not factors.splittable(dq)  # the QK contraction
    assert factors.splittable(dv)  # the output's head dim
    local = localize(region, factors, {hq: 2, sq: 2})
    want = np.asarray(region.evaluate(q, k, v)[0])
    (got,) = local.evaluate(q[2:, 4:], k[2:], v[2:])
    np.testing.assert_allclose(got, want[2:, 4:], rtol=1e-5, atol=1e-6)

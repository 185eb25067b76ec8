"""A region's kernels take its values as the model shaped them and return them in the shapes
the model reads: no reshape stands between a kernel and XLA's own ops.

A decode step updates its KV cache with a dynamic_update_slice and reads the cache in a
region laid out with an extra axis (grouped-query attention's `[B, S, K, 1, H]`). Reshaped at
the custom call, XLA computed the update twice, once for the returned cache and once for the
kernel's operand, and copied the whole cache for each (three copies where jax.jit makes
one). The reference is jax.jit of the same step."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from optimize_test_support import normwise

import mirage_jax as mj
from mirage_jax.superopt import float_check as _float_check

B, S, KV, G, H = 2, 32, 2, 2, 16  # batch, cache length, kv heads, query heads per kv head


def decode_scores(cache, q, k, index):
    """The attention probabilities of one new token over its updated cache, and the cache."""
    cache = jax.lax.dynamic_update_slice(cache, k, (0, index, 0, 0))
    q = q.reshape(B, 1, KV, G, H)
    scores = jnp.einsum("btkgh,bskh->bkgts", q, cache) * H**-0.5
    return jax.nn.softmax(scores, axis=-1), cache


def inputs(q_scale=1.0):
    rng = np.random.default_rng(0)
    cache = rng.standard_normal((B, S, KV, H))
    cache[1, 3:] = 0.0  # a batch row whose cache past position 3 was never written
    return (
        jnp.asarray(cache, jnp.float32),
        jnp.asarray(q_scale * rng.standard_normal((B, 1, KV * G, H)), jnp.float32),
        jnp.asarray(rng.standard_normal((B, 1, KV, H)), jnp.float32),
        jnp.int32(5),
    )


def entry_ops(hlo: str, op: str) -> list[str]:
    entry = hlo[hlo.index("ENTRY") :]
    return [line for line in entry.splitlines() if re.search(rf"\b{op}\b", line)]


@pytest.fixture(scope="module")
def optimized(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
        f = mj.optimize(decode_scores, cache_dir=tmp_path_factory.mktemp("cache"))
        f(*inputs())
        yield f


def test_the_cache_is_updated_once_and_copied_once(optimized):
    args = inputs()
    assert optimized.uses_kernels(*args)
    hlo = optimized._rewritten_jit().lower(*args).compile().as_text()
    updates = [line for line in entry_ops(hlo, "fusion") if "dynamic-update-slice" in line]
    cache_copies = [line for line in entry_ops(hlo, "copy") if "copy(%cache" in line]
    assert len(updates) == 1, updates
    assert len(cache_copies) == 1, cache_copies
    plain = jax.jit(decode_scores).lower(*args).compile().as_text()
    assert len([line for line in entry_ops(plain, "copy") if "copy(%cache" in line]) == 1


@pytest.mark.parametrize("q_scale", [1.0, 1e4], ids=["normal", "huge-logits"])
def test_values_match_jax_jit(optimized, q_scale):
    args = inputs(q_scale)
    got = optimized(*args)
    want = jax.jit(decode_scores)(*args)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.all(np.isfinite(np.asarray(g)))
        assert normwise(g, w) < _float_check.tolerance([jnp.float32])

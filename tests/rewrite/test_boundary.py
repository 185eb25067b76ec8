"""The boundary check: a region whose kernel needs layout copies XLA makes around it is
timed again with them, against the region as plain JAX; a loss keeps it plain JAX, and
the verdict is stored so that another call on the same cache decides alike untimed."""

import jax
import jax.numpy as jnp
import numpy as np

from mirage_jax.frontend import partition
from mirage_jax.rewrite import boundary


def _region():
    def f(x, w):
        return jnp.tanh(x @ w)

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(64, 256), (256, 256)]]
    (region,) = partition(jax.make_jaxpr(f)(*args)).regions
    return region


def test_a_kernel_slower_with_its_copies_is_rejected(tmp_path, monkeypatch):
    monkeypatch.setenv("MIRAGE_JAX_VERDICTS", "1")  # the suite turns stored verdicts off
    region = _region()

    def with_copies(*values):
        # the region's own work plus a transposed copy of a large input, as XLA would lay
        # a [vocab, d] weight out for a kernel that wants it [d, vocab]
        big = jnp.tile(values[1], (16, 1)).T.copy()
        outs = region.evaluate(*values)
        return [outs[0] + 0.0 * jnp.sum(big)]

    wins, note = boundary.check(with_copies, region, tmp_path)
    assert not wins
    assert note.startswith(boundary.LABEL) and "a clear loss" in note, note
    again, stored = boundary.check(with_copies, region, tmp_path)
    assert not again and "verdict loaded from the cache" in stored, stored


def test_a_kernel_faster_with_its_copies_is_kept(tmp_path):
    region = _region()
    values = [jnp.ones(v.shape, v.dtype) for v in region.inputs]
    out = region.evaluate(*values)[0]

    def nearly_free(*values):
        return [out + 0.0 * values[0][0, 0]]

    wins, note = boundary.check(nearly_free, region, tmp_path)
    assert wins, note
    assert "a clear win" in note, note


def test_cold_timing_rotates_the_inputs_and_is_stored_apart(tmp_path, monkeypatch):
    # A region whose program streams more than the caches is timed as its own search timed
    # it: each call on copies of its inputs that the caches cannot hold together. A warm
    # verdict does not answer for it.
    monkeypatch.setenv("MIRAGE_JAX_VERDICTS", "1")
    monkeypatch.setenv("MIRAGE_JAX_CACHE_BYTES", str(1 << 20))
    from mirage_jax.runtime import cold_inputs, profile

    cold_inputs.last_level_cache_bytes.cache_clear()
    region = _region()
    values = [jnp.ones(v.shape, v.dtype) for v in region.inputs]
    out = region.evaluate(*values)[0]
    seen = []
    timed = profile.median_times

    def recording(functions, args, budget_s=profile.BUDGET_S, arg_sets=None):
        seen.append(None if arg_sets is None else len(arg_sets))
        return timed(functions, args, budget_s=budget_s, arg_sets=arg_sets)

    monkeypatch.setattr(profile, "median_times", recording)

    def nearly_free(*values):
        return [out + 0.0 * values[0][0, 0]]

    try:
        wins, warm_note = boundary.check(nearly_free, region, tmp_path)
        assert wins and seen == [None], (seen, warm_note)
        wins, cold_note = boundary.check(nearly_free, region, tmp_path, cold=True)
        # 320 KB of inputs against a 1 MB cache: 7 sets hold twice the cache.
        assert wins and seen[1:] and all(n == 7 for n in seen[1:]), (seen, cold_note)
        assert "evicted from the caches between calls" in cold_note, cold_note
        assert "verdict loaded" not in cold_note, cold_note
        again, stored = boundary.check(nearly_free, region, tmp_path, cold=True)
        assert again and "verdict loaded from the cache" in stored, stored
    finally:
        cold_inputs.last_level_cache_bytes.cache_clear()

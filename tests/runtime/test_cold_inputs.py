"""Cold-cache timing: the input sets a region's timing rotates over hold twice the
last-level cache, every call takes the next set, and the decorator times a function's regions
cold exactly when its arguments exceed that cache."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mirage_jax as mj
from mirage_jax.runtime import cold_inputs, profile


@pytest.fixture
def cache_bytes(monkeypatch):
    """A last-level cache of `n` bytes, as the system would report it."""

    def set_to(n):
        monkeypatch.setenv("MIRAGE_JAX_CACHE_BYTES", str(n))
        cold_inputs.last_level_cache_bytes.cache_clear()

    yield set_to
    cold_inputs.last_level_cache_bytes.cache_clear()


def test_the_sets_hold_twice_the_cache(cache_bytes):
    cache_bytes(1 << 20)
    inputs = [jnp.arange(64 * 1024, dtype=jnp.float32), jnp.ones((128,), jnp.float32)]
    sets = cold_inputs.rotation(inputs)
    size = cold_inputs.nbytes(inputs)
    assert len(sets) * size >= 2 * (1 << 20) > (len(sets) - 1) * size
    assert sets[0] == inputs
    pointers = {s[0].unsafe_buffer_pointer() for s in sets}
    assert len(pointers) == len(sets)  # copies, not the same buffer again
    for s in sets:
        for x, y in zip(s, inputs):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_inputs_larger_than_the_cache_are_not_copied(cache_bytes):
    cache_bytes(1 << 16)
    inputs = [jnp.zeros((1 << 16,), jnp.float32)]  # 256 KiB: four times the cache
    assert len(cold_inputs.rotation(inputs)) == 1


def test_copies_stay_within_their_memory_cap(cache_bytes, monkeypatch):
    cache_bytes(1 << 30)
    monkeypatch.setattr(cold_inputs, "MAX_COPY_BYTES", 1 << 20)
    sets = cold_inputs.rotation([jnp.zeros((1 << 16,), jnp.float32)])  # 256 KiB each
    assert len(sets) == 1 + (1 << 20) // (1 << 18)


def test_every_timed_call_takes_the_next_set():
    seen = []

    def record(tag):
        def fn(x):
            seen.append((tag, int(x[0])))
            return x

        return fn

    sets = [[jnp.full((4,), i, jnp.float32)] for i in range(3)]
    _, rounds = profile.median_times(
        {"a": record("a"), "b": record("b")}, sets[0], budget_s=0.0, arg_sets=sets
    )
    assert rounds == profile.MIN_ROUNDS
    assert [i for _, i in seen] == [k % 3 for k in range(len(seen))]
    assert len(seen) == 2 * (profile.WARMUP_CALLS + rounds * (1 + profile.SETTLE_CALLS))


def _rms_linear(x, g, w):
    v = jnp.mean(x * x, axis=-1, keepdims=True)
    return (x * jax.lax.rsqrt(v + 1e-6) * g) @ w


@pytest.mark.parametrize("cache", [1 << 16, 1 << 30])
def test_the_decorator_times_cold_when_the_arguments_exceed_the_cache(cache_bytes, tmp_path, cache):
    cache_bytes(cache)
    rng = np.random.default_rng(0)
    args = [
        jnp.asarray(rng.standard_normal(s), jnp.float32) for s in [(8, 256), (256,), (256, 512)]
    ]
    config = mj.SearchConfig(
        max_kernel_ops=1, max_block_ops=5, time_budget_s=5, deepen=False, max_verified=2
    )
    opt = mj.optimize(_rms_linear, config=config, cache_dir=tmp_path, min_region_flops=0)
    np.testing.assert_allclose(
        np.asarray(opt(*args)), np.asarray(jax.jit(_rms_linear)(*args)), rtol=2e-5, atol=2e-5
    )
    (report,) = opt.regions(*args)
    cold = cache < cold_inputs.nbytes(args)
    assert ("caches cold" in report.report) == cold, report.report

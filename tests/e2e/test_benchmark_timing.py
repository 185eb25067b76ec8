"""benchmarks/timing.py: a timed call with `depth` queued calls divides the time by them and
makes that many calls (the GPU figure with dispatch overlapped); a depth that cannot run is
refused by name."""

import jax.numpy as jnp
import pytest
from benchmark_support import import_benchmarks

(timing,) = import_benchmarks("timing")


def test_a_queued_call_makes_depth_calls_and_gives_seconds_per_call(monkeypatch):
    calls = []
    clock = iter([10.0, 16.0])  # perf_counter at the start and at the end
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))

    def fn(x):
        calls.append(x)
        return x

    assert timing.timed_call(fn, [jnp.ones(())], depth=3) == pytest.approx(2.0)
    assert len(calls) == 3


@pytest.mark.parametrize("depth", [0, -1])
def test_a_depth_below_one_is_refused(depth):
    with pytest.raises(ValueError, match="depth must be >= 1"):
        timing.timed_call(lambda x: x, [jnp.ones(())], depth=depth)

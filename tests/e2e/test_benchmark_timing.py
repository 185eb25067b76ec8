"""benchmarks/timing.py: a timed call with `depth` queued calls divides the time by them and
makes that many calls (the GPU figure with dispatch overlapped); a depth that cannot run is
refused by name; alternating medians time each function's call after one of its own."""

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


def test_alternating_medians_time_the_call_after_one_of_the_same_function(monkeypatch):
    # A fake clock: a call right after the other function's costs 5, after its own 1.
    state = {"now": 0.0, "last": None}
    monkeypatch.setattr(timing.time, "perf_counter", lambda: state["now"])

    def function(name):
        def fn(x):
            state["now"] += 1.0 if state["last"] == name else 5.0
            state["last"] = name
            return x

        return fn

    a, b = function("a"), function("b")
    args = [jnp.ones(())]
    assert timing.alternating_medians(a, b, args, runs=4) == (1.0, 1.0)
    # Without settling, the calls after the other function's (half of b's, as the order
    # alternates) are in the medians.
    assert min(timing.alternating_medians(a, b, args, runs=4, settle=0)) > 1.0
    with pytest.raises(ValueError, match="settle must be >= 0"):
        timing.alternating_medians(a, b, args, runs=4, settle=-1)

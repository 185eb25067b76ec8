"""profile.fastest_seconds_each: the calibration's probes whose difference is a figure run in
turn, so that both minima come from the same stretch of the machine's load."""

import jax.numpy as jnp
import pytest

from mirage_jax.runtime import profile


def test_the_functions_run_in_turn_and_each_keeps_its_fastest(monkeypatch):
    calls: list[str] = []
    # seconds of each timed call, in order: a slow stretch in the middle of "fast"'s
    timed_seconds = {"fast": iter([2.0, 1.0, 5.0]), "slow": iter([3.0, 4.0, 3.5])}

    def probe(name):
        def fn(x):
            calls.append(name)
            return x

        return fn

    def seconds(fn, args):
        fn(*args)
        return next(timed_seconds[calls[-1]])

    monkeypatch.setattr(profile, "_seconds", seconds)
    functions = {"fast": probe("fast"), "slow": probe("slow")}
    got = profile.fastest_seconds_each(functions, [jnp.ones(())], runs=3)
    assert got == {"fast": 1.0, "slow": 3.0}
    # one warm-up call each, then rounds in turn, not one function's runs after the other's
    assert calls == ["fast", "slow"] + ["fast", "slow"] * 3


def test_stretches_run_each_function_several_times_per_turn(monkeypatch):
    calls: list[str] = []

    def probe(name):
        def fn(x):
            calls.append(name)
            return x

        return fn

    monkeypatch.setattr(profile, "_seconds", lambda fn, args: fn(*args) is None or 1.0)
    functions = {"a": probe("a"), "b": probe("b")}
    got = profile.fastest_seconds_each(functions, [jnp.ones(())], runs=4, stretch=2)
    assert got == {"a": 1.0, "b": 1.0}
    assert calls == ["a", "b"] + ["a", "a", "b", "b"] * 2


@pytest.mark.parametrize("runs, stretch", [(4, 0), (2, 3)])
def test_a_stretch_that_cannot_run_is_refused(runs, stretch):
    with pytest.raises(ValueError, match="stretch"):
        profile.fastest_seconds_each({"a": lambda x: x}, [jnp.ones(())], runs, stretch)

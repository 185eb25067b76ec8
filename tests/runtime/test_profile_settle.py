"""profile.median_times times the call of a function that follows a call of the same
function: the first call after another function's runs slower or faster by phases of the
machine (mirage_jax/runtime/profile.py), and a program calls one executable again and again.
A fake clock makes a call after another function's cost 5 units and a repeated call 1."""

import pytest

from mirage_jax.runtime import profile


class SwitchClock:
    """perf_counter for profile: each call of a function advances it by 1, or by 5 when the
    previous call was another function's."""

    def __init__(self):
        self.now = 0.0
        self.last = None

    def __call__(self):
        return self.now

    def function(self, name):
        def run():
            self.now += 1.0 if self.last == name else 5.0
            self.last = name

        return run


@pytest.fixture
def clock(monkeypatch):
    c = SwitchClock()
    monkeypatch.setattr(profile.time, "perf_counter", c)
    return c


def test_the_timed_call_follows_one_of_the_same_function(clock):
    functions = {n: clock.function(n) for n in "abc"}
    times, rounds = profile.median_times(functions, [], budget_s=0.0)
    assert rounds == profile.MIN_ROUNDS
    assert all(s == [1.0] * rounds for s in times.samples.values())
    assert dict(times) == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_without_settling_the_switch_is_what_gets_timed(clock, monkeypatch):
    # The reference: the protocol before SETTLE_CALLS timed every call right after another
    # function's (5 units), which is what this test would see with SETTLE_CALLS = 0.
    monkeypatch.setattr(profile, "SETTLE_CALLS", 0)
    times, _ = profile.median_times({n: clock.function(n) for n in "ab"}, [], budget_s=0.0)
    assert times["a"] == times["b"] == 5.0


def test_one_function_alone_is_not_called_twice_a_round(clock):
    calls = []

    def only():
        calls.append(1)
        clock.function("only")()

    _, rounds = profile.median_times({"only": only}, [], budget_s=0.0)
    assert len(calls) == profile.WARMUP_CALLS + rounds

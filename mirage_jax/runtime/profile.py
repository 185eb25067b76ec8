"""Timing candidate functions against each other in this process.

Each function is warmed up (its first call compiles through XLA), then all are run in
alternating rounds and each one's samples and median are kept. Alternating spreads slow
phases of the machine (another process, frequency changes) over every function instead of
charging them to whichever ran then, and the median ignores the odd preempted run. The order
within each round is a seeded random permutation, so none always runs right after the same
neighbour, with its caches, and the rounds pair up: sample i of every function was taken in
the same round (mirage_jax/runtime/decision.py compares them round by round).

In each round a function runs SETTLE_CALLS times before the call that is timed. The first
call of a jitted function after another function's is not what the function costs: it ran
up to 1.7x slower or faster than the calls after it, by phases of minutes, on either side of
a comparison. `benchmarks/switch_cost.py --replay` on ranking_replay.py's stored candidates
(inputs rotated past the cache, 2026-12-07): LoRA's kernel against XLA's original measured
0.95x and 0.87x alternating call by call and 1.38-1.51x keeping the second call of each turn
of 2, 4 or 8; masked attention 1.58x and 1.40x against 1.59-1.67x; gqa_decode 1.62x and
1.43x against 1.60-1.70x. A program calls the same executable again and again, so the
settled call is the one it gets.

The arguments should be device arrays (jax.device_put): a numpy argument is copied on every
call, and that copy can cost more than the work being timed.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np

WARMUP_CALLS = 2
# Untimed calls of a function in each round before its timed one (the module's docstring).
SETTLE_CALLS = 1
# Rounds are sized to spend about this long in all; small enough to keep superoptimize
# interactive, with enough rounds for a stable median either way.
BUDGET_S = 1.0
MIN_ROUNDS = 5
MAX_ROUNDS = 200
SEED = 0  # of the order within each round


class Times(dict):
    """{name: median seconds per call}, with `samples` {name: seconds of each round}."""

    def __init__(self, samples: dict[str, list[float]]):
        super().__init__({name: statistics.median(s) for name, s in samples.items()})
        self.samples = samples


def _seconds(fn: Callable, args: Sequence) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def fastest_seconds(fn: Callable, args: Sequence, runs: int = 3) -> float:
    """The fastest of `runs` calls after one warm-up: for rates of the machine (bandwidth,
    flop/s), which other processes' load only ever slows."""
    jax.block_until_ready(fn(*args))
    return min(_seconds(fn, args) for _ in range(runs))


def fastest_seconds_each(
    functions: Mapping[str, Callable], args: Sequence, runs: int = 3, stretch: int = 1
) -> dict[str, float]:
    """{name: the fastest of `runs` calls}, the functions called in turn, round after round:
    for a figure that is the difference of two of them (the extra time of more blocks, of
    shorter runs). Timed one after the other instead, each function's fastest comes from a
    different stretch of the machine's load, and their difference from the load as much as
    from the work (a run overhead measured 0, 3.5 and 5.9 ns within minutes).

    stretch > 1: each turn makes that many calls of one function before the next function's
    (rounds = runs / stretch), for probes that should find their own data in the caches
    (one call of another matmul in between evicts them)."""
    if stretch < 1 or runs < stretch:
        raise ValueError(
            f"fastest_seconds_each: need 1 <= stretch <= runs, got stretch {stretch}, runs {runs}"
        )
    for fn in functions.values():
        jax.block_until_ready(fn(*args))
    fastest = {name: float("inf") for name in functions}
    for _ in range(runs // stretch):
        for name, fn in functions.items():
            for _ in range(stretch):
                fastest[name] = min(fastest[name], _seconds(fn, args))
    return fastest


def median_times(
    functions: Mapping[str, Callable],
    args: Sequence,
    budget_s: float = BUDGET_S,
    arg_sets: Sequence[Sequence] | None = None,
) -> tuple[Times, int]:
    """(Times of the functions all taking `args`, rounds), run in rounds for about budget_s
    seconds. `arg_sets` (mirage_jax/runtime/cold_inputs.py): equal argument sets that the
    calls, in the order they run, take in turn instead of `args`."""
    names = list(functions)
    if not names:
        return Times({}), 0
    sets = list(arg_sets) if arg_sets else [args]
    calls = itertools.count()

    def seconds(name: str) -> float:
        return _seconds(functions[name], sets[next(calls) % len(sets)])

    first = {}
    for name in names:
        for _ in range(WARMUP_CALLS):
            first[name] = seconds(name)
    settle = SETTLE_CALLS if len(names) > 1 else 0  # one function never follows another
    per_round = sum(first.values()) * (1 + settle)
    rounds = int(min(MAX_ROUNDS, max(MIN_ROUNDS, budget_s / max(per_round, 1e-9))))
    samples: dict[str, list[float]] = {name: [] for name in names}
    order = np.random.default_rng(SEED)
    for _ in range(rounds):
        for i in order.permutation(len(names)):
            for _ in range(settle):
                seconds(names[i])
            samples[names[i]].append(seconds(names[i]))
    return Times(samples), rounds

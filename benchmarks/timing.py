"""Timing two functions side by side: warm-up, then alternating calls, medians.

The machines here are shared, so only times measured side by side, in one process, mean
anything: each round calls both functions, and which goes first alternates from round to
round so that neither always inherits the other's cache state. Each function's timed call
follows an untimed one of its own (`settle`): the first call of a jitted function after
another's is not what it costs (mirage_jax/runtime/profile.py, benchmarks/switch_cost.py).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import jax


def timed_call(fn: Callable, args: Sequence, depth: int = 1) -> float:
    """Seconds per call of fn(*args), until its outputs are ready. depth > 1 queues that many
    calls before waiting on the last, as a serving loop does: on a GPU the host's dispatch
    of one call then overlaps the device's work on the one before, so small programs are
    timed by the device rather than by one call's round trip."""
    if depth < 1:
        raise ValueError(f"timed_call: depth must be >= 1, got {depth}")
    start = time.perf_counter()
    for _ in range(depth - 1):
        fn(*args)
    jax.block_until_ready(fn(*args))
    return (time.perf_counter() - start) / depth


def median_seconds(fn: Callable, args: Sequence, runs: int, warmup: int = 2) -> float:
    """The median time of `runs` calls after `warmup` untimed ones."""
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    return statistics.median(timed_call(fn, args) for _ in range(runs))


def alternating_medians(
    first: Callable,
    second: Callable,
    args: Sequence,
    runs: int,
    warmup: int = 3,
    depth: int = 1,
    settle: int = 1,
) -> tuple[float, float]:
    """(median seconds of `first`, of `second`) over `runs` alternating rounds, each round
    timing `depth` queued calls of each (timed_call) after `settle` untimed ones."""
    if runs < 1:
        raise ValueError(f"alternating_medians: runs must be >= 1, got {runs}")
    if settle < 0:
        raise ValueError(f"alternating_medians: settle must be >= 0, got {settle}")
    for _ in range(warmup):
        jax.block_until_ready(first(*args))
        jax.block_until_ready(second(*args))
    a, b = [], []
    for i in range(runs):
        order = ((first, a), (second, b)) if i % 2 == 0 else ((second, b), (first, a))
        for fn, into in order:
            for _ in range(settle):
                jax.block_until_ready(fn(*args))
            into.append(timed_call(fn, args, depth))
    return statistics.median(a), statistics.median(b)

"""Whether a candidate's win over XLA is statistically clear.

A kernel replaces XLA only when a confidence interval of the time ratio XLA/candidate lies
wholly above MIN_SPEEDUP (1.10): a win of a few percent is within what the load of a
machine moves between processes (measured here: up to ±10% on programs of milliseconds), so
it would be kept by one process and dropped by the next, and it is not worth a kernel. At
1.03, the zoo's Llama prefill attention kernel (1.02x, interval [0.98, 1.05], in one run) was
kept in 6 of 10 cold runs and dropped in 4; the fusions worth having win by 1.2-2.5x.

The interval is a paired bootstrap over the timing rounds (mirage_jax/runtime/profile.py
takes sample i of every function in the same round, so a slow phase of the machine falls on
both): rounds are resampled with replacement, and the ratio of the medians of each resample
gives the distribution. While the interval straddles MIN_SPEEDUP (and the point ratio is
at least halfway there), more rounds of the two
alone are taken, up to a budget; a win still unclear then keeps XLA, the choice that is never
wrong. The resampling is seeded, so the same
samples always give the same decision.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

CONFIDENCE = 0.95  # two-sided, of the interval of the ratio
# The least speedup a kept candidate must show: the whole interval lies above it.
MIN_SPEEDUP = 1.10
RESAMPLES = 2000
SEED = 0
# More rounds of the candidate against XLA alone, while the interval straddles MIN_SPEEDUP:
# each call of the timer spends about ROUND_BUDGET_S, and at most EXTRA_BUDGET_S in all.
ROUND_BUDGET_S = 0.5
EXTRA_BUDGET_S = 3.0


@dataclasses.dataclass(frozen=True)
class Decision:
    """kept: the candidate's win is clear. ratio: XLA's median over the candidate's (> 1: the
    candidate is faster); [low, high]: its CONFIDENCE interval; rounds: the samples of each."""

    kept: bool
    ratio: float
    low: float
    high: float
    rounds: int
    min_speedup: float = MIN_SPEEDUP  # what the interval had to clear

    def describe(self, otherwise: str = "XLA") -> str:
        """The decision in words; `otherwise`: what runs when the candidate is not kept."""
        verdict = (
            "a clear win"
            if self.kept
            else (
                "a clear loss"
                if self.high < 1.0
                else f"not a clear win of {self.min_speedup:.2f}x or more, so {otherwise} is kept"
            )
        )
        return (
            f"{self.ratio:.2f}x, {CONFIDENCE:.0%} interval [{self.low:.2f}, {self.high:.2f}] "
            f"over {self.rounds} paired rounds: {verdict}"
        )


def ratio_interval(
    xla: Sequence[float], candidate: Sequence[float], seed: int = SEED
) -> tuple[float, float, float]:
    """(median(xla) / median(candidate), low, high): the point ratio and its CONFIDENCE
    bootstrap interval over paired rounds (both sequences hold one sample per round)."""
    x, c = np.asarray(xla, np.float64), np.asarray(candidate, np.float64)
    if x.shape != c.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(
            f"ratio_interval: expected one sample per round of each, got {x.shape} and {c.shape}"
        )
    if np.any(~np.isfinite(x)) or np.any(~np.isfinite(c)) or np.any(c <= 0) or np.any(x <= 0):
        raise ValueError("ratio_interval: samples must be finite positive seconds")
    ratio = float(np.median(x) / np.median(c))
    picks = np.random.default_rng(seed).integers(0, x.size, size=(RESAMPLES, x.size))
    ratios = np.median(x[picks], axis=1) / np.median(c[picks], axis=1)
    tail = (1.0 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return ratio, float(low), float(high)


def clear_win(
    xla: Sequence[float],
    candidate: Sequence[float],
    seed: int = SEED,
    min_speedup: float = MIN_SPEEDUP,
) -> Decision:
    """The decision on these samples alone: kept when the whole interval is above
    `min_speedup`."""
    ratio, low, high = ratio_interval(xla, candidate, seed)
    return Decision(low > min_speedup, ratio, low, high, len(xla), min_speedup)


def samples_of(times: Mapping[str, float], name: str) -> list[float]:
    """The per-round samples of `name` in a profile.Times; a timing without them (a timer
    replaced by fixed times) counts as one exact round."""
    samples = getattr(times, "samples", None)
    return list(samples[name]) if samples is not None else [float(times[name])]


def worth_more_rounds(min_speedup: float) -> float:
    """The least point ratio for which decide takes more rounds: halfway from 1 to
    `min_speedup`. Below it, more rounds mostly narrow the interval around a ratio that
    stays short of the bar, and they cost up to EXTRA_BUDGET_S per region: with generated
    loops within 10% of XLA's on a prefill's matmuls, every such region spent them, and the
    first call grew by tens of seconds for no kernel."""
    return 1.0 + (min_speedup - 1.0) / 2


def decide(
    times: Mapping[str, float],
    xla: str,
    candidate: str,
    more: Callable[[float], Mapping[str, float]],
    extra_budget_s: float = EXTRA_BUDGET_S,
    min_speedup: float = MIN_SPEEDUP,
    more_from: float | None = None,
) -> Decision:
    """The decision on `times` (a profile.Times holding both), taking more rounds with
    more(seconds) -> Times of the two while the interval straddles `min_speedup` and the
    point ratio is at least `more_from` (default worth_more_rounds(min_speedup)), up to
    extra_budget_s. Exact times (no samples) are decided as they are."""
    if more_from is None:
        more_from = worth_more_rounds(min_speedup)
    x, c = samples_of(times, xla), samples_of(times, candidate)
    decision = clear_win(x, c, min_speedup=min_speedup)
    exact = getattr(times, "samples", None) is None
    spent = 0.0
    while (
        not exact
        and not decision.kept
        and decision.high > min_speedup
        and decision.ratio >= more_from
        and spent < extra_budget_s
    ):
        step = min(ROUND_BUDGET_S, extra_budget_s - spent)
        start = time.perf_counter()
        again = more(step)
        # The wall time, not the step asked for: each call also warms both up, and the
        # rounds of a 100 ms program overshoot a 0.5 s step (GPT-2's prefill spent 8 s of
        # a 3 s budget counted by steps).
        spent += max(step, time.perf_counter() - start)
        if getattr(again, "samples", None) is None:  # a replaced timer: decide on its times
            return clear_win([again[xla]], [again[candidate]], min_speedup=min_speedup)
        x += samples_of(again, xla)
        c += samples_of(again, candidate)
        decision = clear_win(x, c, min_speedup=min_speedup)
    return decision

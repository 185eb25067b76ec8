"""How well the cost model ranked the candidates that superoptimize compiled and timed: the
Spearman correlation between the model's estimates and the measured medians, and where the
fastest measured candidate stood in the model's order (rank 1 is the model's best).

Only compiled candidates have a measured time, so a region's figures cover its top_k
(`benchmarks/superoptimize.py --top-k 8` compiles eight, so that "the fastest was in the
model's top 4" can come out false)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np


def _ranks(values: list[float]) -> np.ndarray:
    """Ranks from 1, ties given their mean rank (as Spearman's rho defines it)."""
    x = np.asarray(values, np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of a and b (NaN when fewer than 3 pairs, or one side is
    constant)."""
    if len(a) != len(b):
        raise ValueError(f"spearman: {len(a)} values against {len(b)}")
    if len(a) < 3:
        return math.nan
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


@dataclasses.dataclass(frozen=True)
class Ranking:
    candidates: int  # compiled and timed, with a cost model estimate
    spearman: float  # NaN below 3 candidates
    fastest_rank: int | None  # the fastest measured candidate's place in the model's order

    def in_top(self, k: int) -> bool | None:
        return None if self.fastest_rank is None else self.fastest_rank <= k


def ranking(costs: dict[str, float], timings: dict[str, float]) -> Ranking:
    """The figures for one superoptimize call: `costs` and `timings` by candidate hash (the
    "xla" timing and candidates the model gave no estimate are left out)."""
    names = [n for n in costs if n in timings]
    if not names:
        return Ranking(0, math.nan, None)
    by_cost = sorted(names, key=lambda n: costs[n])
    fastest = min(names, key=lambda n: timings[n])
    return Ranking(
        len(names),
        spearman([costs[n] for n in names], [timings[n] for n in names]),
        by_cost.index(fastest) + 1,
    )

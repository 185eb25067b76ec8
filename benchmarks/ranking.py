"""How well the cost model ranked the candidates that superoptimize compiled and timed: the
Spearman correlation between the model's estimates and the measured medians, and where the
fastest measured candidate stood in the model's order (rank 1 is the model's best).

Its regret says what trusting the model alone would cost: the measured time of its first choice
over the fastest measured one.

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
    # The measured time of the model's first choice over the fastest measured one: what
    # trusting the model alone would have cost (1.0: it picked the fastest). NaN: none timed.
    regret: float = math.nan

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
        timings[by_cost[0]] / timings[fastest],
    )


@dataclasses.dataclass(frozen=True)
class Summary:
    """Ranking figures over many superoptimize calls (programs or regions)."""

    ranked: int  # calls with at least one timed candidate
    with_spearman: int  # of them, with three or more
    mean_spearman: float
    fastest_in_top4: int
    regret_geomean: float

    def line(self) -> str:
        if not self.ranked:
            return "cost model: no call timed a candidate"
        return (
            f"cost model: mean Spearman {self.mean_spearman:.2f} over {self.with_spearman} "
            f"calls with 3 or more timed candidates; the fastest measured candidate was in "
            f"its top 4 in {self.fastest_in_top4} of {self.ranked}; its first choice ran "
            f"{self.regret_geomean:.2f}x the fastest's time (geometric mean)"
        )

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def summarize(rankings: list[Ranking]) -> Summary:
    ranked = [r for r in rankings if r.fastest_rank is not None]
    rhos = [r.spearman for r in ranked if not math.isnan(r.spearman)]
    regrets = [r.regret for r in ranked]
    return Summary(
        ranked=len(ranked),
        with_spearman=len(rhos),
        mean_spearman=sum(rhos) / len(rhos) if rhos else math.nan,
        fastest_in_top4=sum(bool(r.in_top(4)) for r in ranked),
        regret_geomean=math.exp(sum(map(math.log, regrets)) / len(regrets))
        if regrets
        else math.nan,
    )

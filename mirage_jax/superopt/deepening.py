"""Iterative deepening of the μGraph search: the config's limits reached from narrow ones.

The C++ search is depth first inside a wall budget. With wide limits it can spend the whole
budget under its first branches and never reach a small graph that a narrow search finds at
once: LoRA's single-kernel form is found in 0.4 s with 1 kernel op and 4 block ops and not
in 120 s with the lora preset's wider limits. So the limits are climbed as rungs, (kernel
ops, block ops) from small to the config's own, each rung run to its end or to its share of
what is left of the budget, and the candidates of every rung are kept. Whatever a narrower
config finds is then in a wider config's result too, given the budget the narrow one needed
on each rung below it: a narrow rung that runs to its end costs a small part of a wide one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from mirage_jax.superopt.config import SearchConfig

if TYPE_CHECKING:  # search.py imports this module
    from mirage_jax.superopt.search import SearchResult

# The first rung's block ops. A limit is a bound, not an exact count, so smaller block graphs
# are in it too; rungs below it would repeat its work for the few forms they hold.
MIN_BLOCK_OPS = 4
# A rung's share of the budget is never below this: the search's own start-up (building the
# target's e-graph) would take all of a smaller one.
MIN_RUNG_S = 0.05


def rungs(config: SearchConfig) -> list[SearchConfig]:
    """The configs the deepened search runs, in order; the last is `config` itself."""
    top_k, top_b = config.max_kernel_ops, config.max_block_ops
    low_b = min(top_b, MIN_BLOCK_OPS)
    pairs = sorted(
        ((k, b) for k in range(1, top_k + 1) for b in range(low_b, top_b + 1)),
        key=lambda kb: (kb[0] + kb[1], kb[0]),
    )
    ladder = []
    for k, b in pairs:
        if (k, b) == (top_k, top_b):
            continue
        ladder.append(
            dataclasses.replace(
                config,
                max_kernel_ops=k,
                max_block_ops=b,
                # A block graph is a kernel op: more of them than kernel ops changes nothing.
                max_block_graphs=min(config.max_block_graphs, k),
            )
        )
    ladder.append(config)
    return ladder


@dataclasses.dataclass
class Climb:
    """The state of a deepened search: the budget left, and the rungs' results so far."""

    config: SearchConfig
    results: list[SearchResult] = dataclasses.field(default_factory=list)
    spent_s: float = 0.0

    def budget_for(self, rung: int, total: int) -> float:
        """The rung's share: what is left, split evenly over the rungs left. The last rung
        gets all that is left, so a config with one rung runs as it would undeepened."""
        left = max(self.config.time_budget_s - self.spent_s, MIN_RUNG_S)
        return left if rung == total - 1 else max(left / (total - rung), MIN_RUNG_S)


def climb(config: SearchConfig, run: Callable[[SearchConfig], SearchResult]) -> list[SearchResult]:
    """Runs `run` on every rung of `config` within its budget and returns their results.
    Stops after a rung stopped by the caller (reason "stopped"), and when the budget is
    spent; a rung whose search cannot start (its reason is anything but running out of time)
    ends the climb too: every wider rung would fail the same way."""
    ladder = rungs(config)
    state = Climb(config)
    for i, rung in enumerate(ladder):
        if i and state.spent_s >= config.time_budget_s:
            break
        budget = state.budget_for(i, len(ladder))
        result = run(dataclasses.replace(rung, time_budget_s=budget))
        state.results.append(result)
        state.spent_s += result.stats.seconds
        if result.reason not in ("", "time budget spent"):
            break
    return state.results

"""A program whose outputs are computed apart, searched one group of outputs at a time.

A decode step's q, k and v projections of one normed activation are three matmuls of
different widths: no block graph holds them all, so the search of the whole fuses nothing,
though each projection with its norm is an RMSNorm + Linear it fuses readily. The outputs are
grouped by the matmuls they share (cc/ir/cones.h); each group's cone (the ops it needs, the
norm recomputed in each) is searched as a program of its own, and candidates for the cones
are joined into programs of the whole. Each join is verified against the original program
and costed over the whole, and competes with the whole's own candidates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from mirage_jax import _core
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.superopt.config import SearchConfig
from mirage_jax.superopt.parts import verified_and_ranked

if TYPE_CHECKING:  # search.py imports this module
    from mirage_jax.superopt.search import SearchResult

# Per cone, its best candidates by the cost model that are joined: the best of every cone,
# then each cone's runners-up with the others' best (1 + cones x 2 joins, each verified).
CONE_CANDIDATES = 3


@dataclasses.dataclass(frozen=True)
class Cones:
    """The joins of the cones' best candidates, verified, with the model's costs."""

    candidates: list[KernelGraph]
    costs: list[float]
    results: list[SearchResult]  # each cone's search, for its stats
    note: str  # how the outputs were grouped, for reports


def output_cones(graph: KernelGraph) -> list[_core.OutputCone]:
    """The groups of `graph`'s outputs that share no matmul; [] for a single group."""
    return list(_core.output_cones(graph._core))


def search_cones(
    graph: KernelGraph,
    cones: list[_core.OutputCone],
    config: SearchConfig,
    budget_s: float,
    target: _core.Target,
    run: Callable[[KernelGraph, SearchConfig], SearchResult],
) -> Cones:
    """Each cone of `graph` searched with `config`'s limits (its preset chosen per cone, no
    user-given grids or maps: those were given for the whole) within an equal share of
    `budget_s`, by `run(cone, config)` -> SearchResult, and their candidates joined."""
    cone_config = dataclasses.replace(config, grids=None, imaps=None, omaps=None, fmaps=None)
    results: list[SearchResult] = []
    for i, cone in enumerate(cones):
        program = KernelGraph._wrap(cone.program)
        share = max(budget_s - sum(r.stats.seconds for r in results), 0.0) / (len(cones) - i)
        cfg = dataclasses.replace(cone_config, time_budget_s=max(share, 0.05))
        results.append(run(program, cfg.for_graph(program)))
    choices = [
        r.candidates[:CONE_CANDIDATES] or [KernelGraph._wrap(c.program)]
        for r, c in zip(results, cones, strict=True)
    ]
    picks = [[0] * len(cones)]
    for i, options in enumerate(choices):
        for j in range(1, len(options)):
            picks.append([j if k == i else 0 for k in range(len(cones))])
    joined = (
        KernelGraph._wrap(
            _core.join_cones(graph._core, cones, [choices[i][j]._core for i, j in enumerate(pick)])
        )
        for pick in picks
    )
    candidates, costs = verified_and_ranked(graph, joined, config.seed, target)
    groups = ", ".join("(" + " ".join(map(str, c.outputs)) + ")" for c in cones)
    return Cones(
        candidates=candidates,
        costs=costs,
        results=results,
        note=f"outputs grouped by the matmuls they share: {groups}",
    )

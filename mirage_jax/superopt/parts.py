"""A program the search cannot fuse whole, searched as two parts and ranked as one.

The search's limits are sized for one fused kernel. A program such as qknorm_gqa (two norms,
then attention) needs more block ops than that in one kernel, and the search of the whole
finds nothing to fuse; Mirage partitions its input programs for the same reason. So the
program is cut before its first matmul of computed values (split.py): the prefix (the
program's inputs to the values crossing the cut) and the tail (those values to the outputs)
are each searched as a program of their own, and every pair of a prefix candidate and a tail
candidate, each part's unfused original included, is spliced into a graph of the whole,
and each splice also with the ops before its fused kernels folded into them where their
tiles allow (with_folds: XLA's norms and a fused attention become the paper's one kernel).
Each is verified against the original program and costed by the model over the whole (its
kernels one after the other), so a fused tail behind XLA's prefix, a fused prefix before
XLA's tail, and both fused compete on one scale, and the search returns them like any
candidate of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from mirage_jax import _core
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.superopt import contenders
from mirage_jax.superopt import split as _split
from mirage_jax.superopt.config import SearchConfig
from mirage_jax.superopt.verify import verify_equivalent

if TYPE_CHECKING:  # search.py imports this module
    from mirage_jax.superopt.search import SearchResult

# The best candidates of each part by the cost model (its original among them whenever the
# part's search ran) that are paired: 3 x 3 splices, each verified on its own.
PART_CANDIDATES = 3
# The prefix's share of the parts' budget: the tail holds the matmuls (and the attention),
# whose search is the longer one.
PREFIX_SHARE = 1 / 3


@dataclasses.dataclass(frozen=True)
class Parts:
    """The splices of the best part candidates, verified, with the model's costs."""

    candidates: list[KernelGraph]
    costs: list[float]
    results: list[SearchResult]  # the two parts' (prefix, tail), for their stats
    note: str  # where the program was cut, for reports


def fuses(graph: KernelGraph) -> bool:
    return any(op.kind == "customized" for op in graph.ops)


def search_parts(
    graph: KernelGraph,
    config: SearchConfig,
    budget_s: float,
    target: _core.Target,
    run: Callable[[KernelGraph, SearchConfig], SearchResult],
) -> Parts | None:
    """The parts of `graph` searched with `config`'s limits (its preset chosen per part, no
    user-given grids or maps: those were given for the whole) within `budget_s`, by
    `run(part, config)` -> SearchResult; None when `graph` has no cut
    (split.split_before_first_computed_matmul)."""
    split = _split.split_before_first_computed_matmul(graph)
    if split is None:
        return None
    part_config = dataclasses.replace(config, grids=None, imaps=None, omaps=None, fmaps=None)
    prefix = _split.prefix_program(split)
    prefix_budget = budget_s * PREFIX_SHARE
    prefix_result = run(prefix, _with_budget(part_config, prefix, prefix_budget))
    tail_budget = max(budget_s - prefix_result.stats.seconds, prefix_budget)
    tail_result = run(split.tail, _with_budget(part_config, split.tail, tail_budget))
    spliced = (
        _split.splice_parts(split, head, tail)
        for head in _with_original(_best(prefix_result), prefix)
        for tail in _best(tail_result) or [split.tail]
    )
    candidates, costs = verified_and_ranked(graph, with_folds(spliced), config.seed, target)
    return Parts(
        candidates=candidates,
        costs=costs,
        results=[prefix_result, tail_result],
        note=f"cut before t{split.cut_tensor}, the first matmul of computed values",
    )


def with_folds(wholes: Iterable[KernelGraph]) -> Iterator[KernelGraph]:
    """Each of `wholes`, then the same graph with the kernel-level ops before its fused
    kernels folded into them where the kernels' tiles allow (cc/ir/fold_prologue.h): a
    splice of XLA's prefix and a fused tail is then also the one kernel the paper writes
    (qknorm_gqa's norms in its attention kernel), which neither part's search makes."""
    for whole in wholes:
        yield whole
        folded = _split.fold_prologues(whole)
        if folded is not None:
            yield folded


def _with_original(best: list[KernelGraph], original: KernelGraph) -> list[KernelGraph]:
    """A part's best and its unfused original, once: the original's kernel-level ops are
    what with_folds folds into the tail's kernels."""
    if any(g.hash() == original.hash() for g in best):
        return best
    return [*best, original]


def _best(result: SearchResult) -> list[KernelGraph]:
    """A part's PART_CANDIDATES best, ties in the model ordered as superoptimize's contenders
    (contenders.tie_order): of a part's tied candidates only these are spliced."""
    ranked = contenders.tie_order(list(zip(result.candidates, result.costs)))
    return [graph for graph, _ in ranked[:PART_CANDIDATES]]


def verified_and_ranked(
    graph: KernelGraph, wholes: Iterable[KernelGraph], seed: int, target: _core.Target
) -> tuple[list[KernelGraph], list[float]]:
    """The graphs among `wholes` (programs of `graph` made of its pieces' candidates) that
    fuse something, once each, verified against `graph`, best first by the cost model on
    `target`, with their costs. Each piece was verified against its own program; the whole
    is checked all the same, so no returned graph rests on how the program was cut."""
    original = graph.hash()
    found: dict[str, tuple[float, KernelGraph]] = {}
    for whole in wholes:
        key = whole.hash()
        if key == original or key in found or not fuses(whole):
            continue
        if verify_equivalent(graph, whole, seed=seed).equivalent:
            found[key] = (_core.estimate_cost(whole._core, target)[0], whole)
    ranked = sorted(found.values(), key=lambda cost_graph: cost_graph[0])
    return [g for _, g in ranked], [c for c, _ in ranked]


def _with_budget(config: SearchConfig, part: KernelGraph, budget_s: float) -> SearchConfig:
    return dataclasses.replace(config, time_budget_s=budget_s).for_graph(part)

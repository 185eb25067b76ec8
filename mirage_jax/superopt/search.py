"""search: the μGraph search (cc/search) for a validated SearchConfig (config.py).

The C++ search enumerates kernel and block graphs, prunes them with abstract expressions,
verifies the survivors and ranks them. This module shows progress and wraps the candidates
as KernelGraphs.

Stopping early: a progress hook returning False stops the search, which then returns what it
found with reason "stopped". Ctrl-C (or any exception raised by a hook) also stops it, and the
exception is raised again once the C++ search has joined its threads: an interrupted script
stops, as Ctrl-C promises, rather than carrying on with a partial result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from mirage_jax import _core
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.superopt import calibration_cache, cones, deepening, parts, user_structure
from mirage_jax.superopt import lift as _lift
from mirage_jax.superopt import split as _split
from mirage_jax.superopt.config import SearchConfig
from mirage_jax.superopt.progress import ProgressReporter, SearchProgress
from mirage_jax.superopt.verify import verify_equivalent


@dataclasses.dataclass(frozen=True)
class SearchStats:
    """What one search did. Verification time is summed over threads, so it can exceed the
    enumeration's wall time. A deepened search (SearchConfig.deepen) sums its rungs: a
    candidate found on several rungs is verified and counted on each."""

    states_explored: int  # partial graphs built, kernel and block level
    states_pruned: int  # rejected by the abstract-expression check
    candidates_verified: int
    candidates_accepted: int
    seconds_saturate: float  # the target's e-graph, built once
    seconds_enumerate: float  # wall time, verification included
    seconds_verify: float  # CPU time over all threads
    seconds_rank: float
    candidates_unverified: int = 0  # found but never verified (max_verified)

    @property
    def seconds(self) -> float:
        """Wall seconds of the search (verification runs inside the enumeration)."""
        return self.seconds_saturate + self.seconds_enumerate + self.seconds_rank

    def __str__(self) -> str:
        unverified = (
            f", {self.candidates_unverified:,} more left unverified"
            if self.candidates_unverified
            else ""
        )
        return (
            f"explored {self.states_explored:,} states ({self.states_pruned:,} pruned); "
            f"verified {self.candidates_verified:,} candidates, accepted "
            f"{self.candidates_accepted:,}{unverified}; "
            f"seconds: saturate {self.seconds_saturate:.3f}, "
            f"enumerate {self.seconds_enumerate:.3f} (verify {self.seconds_verify:.3f} cpu), "
            f"rank {self.seconds_rank:.3f}"
        )


_NO_STATS = SearchStats(0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0)
# A program that can be cut (parts.py) searches whole with this share of its budget; its
# parts get the rest when the whole fuses nothing.
WHOLE_SHARE = 0.5
# A program whose outputs share no matmul (cones.py) searches whole with this share: a
# block graph seldom holds matmuls of different widths, and each cone is a search of its
# own (the projections' three took 0.16 s each of a 1 s region budget at WHOLE_SHARE, and
# the join they found ran 0.62 ms where one from 0.6 s cones ran 0.35).
CONES_WHOLE_SHARE = 0.2
# The best candidates whose kernel-level ops before a fused kernel are folded into it
# (_with_derived). The search's own best often leaves a matmul to the library in front of a
# fused kernel (attention's scores before its softmax and P @ V); folded, that is the
# one-kernel form its block-op limit did not reach (gqa_prefill's first candidate, folded;
# LoRA's two-kernel first, folded, is its one-kernel form).
FOLDED_CANDIDATES = 8
# Slice counts of the split-KV form (split.split_kv) of the best online-softmax kernels
# among those candidates and their folds, SPLIT_KV_SOURCES of them: a decode step's
# attention walks all keys in one block per KV head, fewer blocks than a GPU has
# multiprocessors, which the paper's split-KV μGraph fills; the search's limits do not
# reach it (3 kernel-level ops, 7 block ops in the combine).
SPLIT_KV_COUNTS = (2, 4, 8, 16)
SPLIT_KV_SOURCES = 2


@dataclasses.dataclass(frozen=True, repr=False)
class SearchResult:
    """Verified candidates, best first by the cost model. The input graph itself is among
    them whenever the search ran, so a non-empty result never has to be worse than it."""

    candidates: list[KernelGraph]
    costs: list[float]  # estimated seconds on the config's target, parallel to candidates
    stats: SearchStats
    reason: str  # why the search stopped early or found nothing; "" when it ran to the end
    # "" unless the whole fused nothing and its parts were searched (parts.py): where it was
    # cut, and the parts' searches.
    parts: str = ""

    def __len__(self) -> int:
        return len(self.candidates)

    def __iter__(self) -> Iterator[KernelGraph]:
        return iter(self.candidates)

    def __repr__(self) -> str:
        best = f", best {self.costs[0]:.3g} s" if self.costs else ""
        reason = f", reason={self.reason!r}" if self.reason else ""
        return f"<SearchResult: {len(self.candidates)} candidates{best}{reason}>"


ProgressHook = Callable[[SearchProgress], "bool | None"]


def search(
    graph: KernelGraph,
    config: SearchConfig | None = None,
    *,
    progress: bool | ProgressHook = True,
) -> SearchResult:
    """Searches for μGraphs equivalent to `graph` (kernel-level ops only) and returns the
    verified ones, best first.

    progress: True shows a progress bar on a terminal (stderr) and logs through absl
    otherwise; False is silent; a callable receives a SearchProgress about every 50 ms and
    stops the search by returning False.

    A graph the search cannot take (a customized op in it, no outputs, ...) gives an empty
    result whose reason says why. A config's grids or maps that no tensor of `graph` can take
    are a ValueError naming them. Ctrl-C raises KeyboardInterrupt once the search has stopped.
    """
    if not isinstance(graph, KernelGraph):
        raise TypeError(
            f"search: argument 'graph' must be a mirage_jax KernelGraph, got {type(graph).__name__}"
        )
    if config is None:
        config = SearchConfig()
    elif not isinstance(config, SearchConfig):
        raise TypeError(
            f"search: argument 'config' must be a mirage_jax SearchConfig, "
            f"got {type(config).__name__}"
        )
    asked = config
    config = config.for_graph(graph)
    user_structure.check_against(graph, config)
    reporter: ProgressReporter | None
    hook: ProgressHook | None
    if isinstance(progress, bool):
        reporter = ProgressReporter.for_stderr() if progress else None
        hook = reporter
    elif callable(progress):
        reporter = None
        hook = progress
    else:
        raise TypeError(
            f"search: argument 'progress' must be a bool or a callable taking a "
            f"SearchProgress, got {type(progress).__name__}"
        )

    # The C++ search keeps reporting while its threads unwind; a hook that said stop is
    # not asked again.
    stop_requested = False
    # A deepened search's rungs report from zero each: shown after the rungs before them.
    earlier = SearchProgress(0, 0, 0, 0, 0.0)

    # The last report of the running rung: its best so far carries into the next rung's.
    latest: SearchProgress | None = None

    def core_hook(info: _core.SearchProgressInfo) -> bool:
        nonlocal stop_requested, latest
        if hook is not None and not stop_requested:
            report = earlier.followed_by(SearchProgress.from_core(info))
            latest = report
            stop_requested = hook(report) is False
        return not stop_requested

    searched_hook = None if hook is None else core_hook
    # Resolved once for every rung and part: the "cpu" target is this machine's calibration,
    # measured here (a few seconds) the first time any search runs on it.
    target = calibration_cache.cpu_target()[0] if config.target == "cpu" else None

    def run_rung(g: KernelGraph, rung: SearchConfig) -> SearchResult:
        nonlocal earlier, latest
        latest = None
        result = _run(g, rung, searched_hook, target)
        stats = result.stats
        best = latest.best_seconds if latest is not None else None
        original = latest.original_seconds if latest is not None else None
        earlier = earlier.followed_by(
            SearchProgress(
                0,
                0,
                stats.states_explored,
                stats.candidates_accepted,
                stats.seconds,
                best,
                original,
            )
        )
        return result

    def run_search(g: KernelGraph, cfg: SearchConfig) -> SearchResult:
        """A whole search of `g` (its own parts and lift included), reporting to `hook`."""
        nonlocal earlier
        before = earlier

        def forward(report: SearchProgress) -> bool:
            nonlocal stop_requested
            if hook is not None and not stop_requested:
                stop_requested = hook(before.followed_by(report)) is False
            return not stop_requested

        result = search(g, cfg, progress=forward)
        stats = result.stats
        earlier = before.followed_by(
            SearchProgress(0, 0, stats.states_explored, stats.candidates_accepted, stats.seconds)
        )
        return result

    def run_graph(g: KernelGraph, cfg: SearchConfig) -> SearchResult:
        if cfg.deepen:
            runs = deepening.climb(cfg, lambda rung: run_rung(g, rung))
            return _merged(runs, cfg.max_verified, g.hash())
        return run_rung(g, cfg)

    try:
        # A program that can be cut keeps part of the budget for its parts, searched when
        # the whole fuses nothing (parts.py).
        # Outputs that share no matmul (cones.py) are searched apart in the same way.
        output_cones = cones.output_cones(graph)
        splittable = _split.split_before_first_computed_matmul(graph) is not None
        share = CONES_WHOLE_SHARE if output_cones else WHOLE_SHARE if splittable else 1.0
        result = run_graph(
            graph, dataclasses.replace(config, time_budget_s=config.time_budget_s * share)
        )
        core_target = target if target is not None else config._to_core().target
        left_s = config.time_budget_s - result.stats.seconds
        fused_whole = any(map(parts.fuses, result.candidates))
        # The pieces are searched even when the whole fused: a whole fused at a poor grid (a
        # decode's norm and gate/up matmuls in 64 loopless tiles 44 columns wide, 1.45 ms
        # against XLA's 1.10) loses to a cut one (the norm apart, the matmuls walked along k:
        # 0.78 ms), and only the timings can tell which. They get no more time than the whole
        # took, or a small program's large budget (a test's 20 s) would all go to its parts.
        if fused_whole:
            left_s = min(left_s, result.stats.seconds)
        pieces = not stop_requested and left_s > 0
        why = "the whole program fused too" if fused_whole else "nothing fused the whole program"
        if pieces and output_cones:
            # A cone may need its own parts or lift (a norm and a matmul with a second
            # output): each is searched as a whole program.
            joined = cones.search_cones(graph, output_cones, asked, left_s, core_target, run_search)
            result = _with_pieces(
                result,
                joined.candidates,
                joined.costs,
                [f"cone {i}" for i in range(len(joined.results))],
                joined.results,
                f"each group of its outputs was searched ({why}; {joined.note})",
                f"{len(joined.candidates)} joined graphs verified",
                config.max_verified,
                graph.hash(),
            )
        elif pieces and splittable:
            found = parts.search_parts(graph, asked, left_s, core_target, run_graph)
            if found is not None:
                result = _with_parts(result, found, why, config.max_verified, graph.hash())
        if not stop_requested:
            result = _with_derived(result, graph, config, core_target)
        given = (config.grids, config.imaps, config.omaps, config.fmaps)
        if stop_requested or any(map(parts.fuses, result.candidates)) or any(given):
            return result  # a lift picks its own grid: not one where the caller fixed them
        return _with_lifted(result, graph, config, core_target)
    finally:
        if reporter is not None:
            reporter.close()


def _run(
    graph: KernelGraph,
    config: SearchConfig,
    hook: Callable[[_core.SearchProgressInfo], bool] | None,
    target: _core.Target | None,
) -> SearchResult:
    core = config._to_core()
    if target is not None:
        core.target = target
    info = _core.search(graph._core, core, hook)
    stats = info.stats
    return SearchResult(
        candidates=[KernelGraph._wrap(core) for core in info.candidates],
        costs=list(info.costs),
        stats=SearchStats(
            states_explored=stats.states_explored,
            states_pruned=stats.states_pruned,
            candidates_verified=stats.candidates_verified,
            candidates_accepted=stats.candidates_accepted,
            candidates_unverified=stats.candidates_unverified,
            seconds_saturate=stats.seconds_saturate,
            seconds_enumerate=stats.seconds_enumerate,
            seconds_verify=stats.seconds_verify,
            seconds_rank=stats.seconds_rank,
        ),
        reason=info.reason,
    )


def _merged(results: list[SearchResult], max_verified: int | None, original: str) -> SearchResult:
    """One result of a deepened search's rungs: their candidates once each (a narrow rung's
    graphs come again in the wider ones), best first, at most max_verified of them besides
    the original graph (hash `original`), which stays as in one search's result; the stats
    summed; the last rung's reason, else the first reason given."""
    best: dict[str, tuple[float, KernelGraph]] = {}
    for result in results:
        for graph, cost in zip(result.candidates, result.costs, strict=True):
            key = graph.hash()
            if key not in best or cost < best[key][0]:
                best[key] = (cost, graph)
    ranked = sorted(best.values(), key=lambda cg: cg[0])
    if max_verified is not None:
        found = [cg for cg in ranked if cg[1].hash() != original][:max_verified]
        ranked = sorted(
            found + [cg for cg in ranked if cg[1].hash() == original], key=lambda cg: cg[0]
        )
    total = {
        f.name: sum(getattr(r.stats, f.name) for r in results)
        for f in dataclasses.fields(SearchStats)
    }
    reasons = [r.reason for r in results]
    reason = reasons[-1] or next((r for r in reasons if r), "")
    return SearchResult(
        candidates=[graph for _, graph in ranked],
        costs=[cost for cost, _ in ranked],
        stats=SearchStats(**total),
        reason=reason,
    )


def _with_lifted(
    result: SearchResult, graph: KernelGraph, config: SearchConfig, target: _core.Target
) -> SearchResult:
    """`result`, which fuses nothing, with `graph` lifted whole into one kernel (lift.py)
    among its candidates, each verified against `graph` and costed on `target`."""
    found = []
    for candidate in _lift.lifted(graph, max(1, int(target.cores))):
        if verify_equivalent(graph, candidate, seed=config.seed).equivalent:
            found.append((_core.estimate_cost(candidate._core, target)[0], candidate))
    if not found:
        return result
    lifted = SearchResult([g for _, g in found], [c for c, _ in found], _NO_STATS, "")
    ranked = _merged([result, lifted], config.max_verified, graph.hash())
    return dataclasses.replace(
        result,
        candidates=ranked.candidates,
        costs=ranked.costs,
        parts=(result.parts + "; " if result.parts else "")
        + f"the search fused nothing, so the program was lifted whole into one kernel "
        f"({len(found)} verified)",
    )


def _with_derived(
    result: SearchResult, graph: KernelGraph, config: SearchConfig, target: _core.Target
) -> SearchResult:
    """`result` with graphs derived from its best among its candidates, each verified against
    `graph` and costed on `target`: its FOLDED_CANDIDATES best folded (split.fold_prologues),
    and the split-KV forms (split.split_kv) of the first SPLIT_KV_SOURCES of the folds and
    those best that have an online-softmax kernel (qknorm_gqa's fold, split, is the paper's
    μGraph)."""
    best = result.candidates[:FOLDED_CANDIDATES]
    folds = [f for f in map(_split.fold_prologues, best) if f is not None]
    splits: list[KernelGraph] = []
    sources = 0
    for candidate in [*folds, *best]:
        if sources == SPLIT_KV_SOURCES:
            break
        found = _split.split_kv(candidate, SPLIT_KV_COUNTS)
        sources += bool(found)
        splits += found
    notes = []
    for graphs, what in ((folds, "folded"), (splits, "split-KV")):
        candidates, costs = parts.verified_and_ranked(graph, graphs, config.seed, target)
        if not candidates:
            continue
        derived = SearchResult(candidates, costs, _NO_STATS, "")
        ranked = _merged([result, derived], config.max_verified, graph.hash())
        result = dataclasses.replace(result, candidates=ranked.candidates, costs=ranked.costs)
        notes.append(f"{len(candidates)} {what} graphs verified")
    if not notes:
        return result
    made = "; ".join(notes)
    return dataclasses.replace(result, parts=f"{result.parts}; {made}" if result.parts else made)


def _with_parts(
    whole: SearchResult, found: parts.Parts, why: str, max_verified: int | None, original: str
) -> SearchResult:
    """The whole's result with the parts' splices among its candidates (_with_pieces)."""
    return _with_pieces(
        whole,
        found.candidates,
        found.costs,
        ["prefix", "tail"],
        found.results,
        f"its parts were searched ({why}; {found.note})",
        f"{len(found.candidates)} spliced graphs verified",
        max_verified,
        original,
    )


def _with_pieces(
    whole: SearchResult,
    candidates: list[KernelGraph],
    costs: list[float],
    names: list[str],
    results: list[SearchResult],
    how: str,
    made: str,
    max_verified: int | None,
    original: str,
) -> SearchResult:
    """The whole's result with the graphs made of its pieces' candidates (parts.py,
    cones.py) among its candidates, ranked together, at most max_verified of them besides
    the original; the stats summed over every search."""
    pieces = SearchResult(candidates, costs, _NO_STATS, "")
    ranked = _merged([whole, pieces], max_verified, original)
    stats = _merged([whole, *results], None, original).stats
    described = "; ".join(
        f"{name}: {len(r.candidates)} candidates ({r.stats})"
        for name, r in zip(names, results, strict=True)
    )
    return SearchResult(
        candidates=ranked.candidates,
        costs=ranked.costs,
        stats=stats,
        reason=whole.reason,
        parts=f"{how}; {described}; {made}",
    )

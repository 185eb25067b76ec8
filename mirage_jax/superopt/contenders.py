"""Which of the search's candidates superoptimize compiles and times against XLA.

The cost model's best top_k, the original aside (it is timed under XLA whatever its rank).
Decode's regions are memory-bound, and their candidates often cost the same to the model
within a percent (every way to stream the same weights once), while their kernels differ
by far more: the tied logits matmul of GPT-2's batch-8 step had eight candidates between
0.892 and 0.902 ms in the model, and the seven of them timed ran 1.28 to 11.0 ms. With
top_k = 1 (most regions of a decorated function) the model's tie-break alone picked the
kernel. So candidates the model cannot tell from the first (within COST_TIE) also join, as
long as all their kernels build side by side at once (one compiler per core): the extra
build adds little wall time (it runs beside the best's), and timing one more candidate a
fraction of a second.

Within such a tie, the candidates whose generated kernels load their tiles in the fewest
contiguous runs come first (`runs_loaded`): the model prices a run at what the calibration
measures, which is nothing on a machine whose prefetchers follow its probe, while the
kernels that cut a streamed weight's rows into many short pieces ran far slower. GPT-2's
tied logits `wte[8192, 768] @ x[768, 1]` (25 MB, measured cold, 2026-12-05): ten candidates
within 0.3% of each other in the model; the one reading whole rows ([128, 768] tiles, 128
runs) ran 0.72-0.80 ms, the two the tie-break had picked ([2048, 48] and [2048, 32] tiles
walked 16 and 24 times, 131,000-197,000 runs) 0.98-2.24 ms, XLA 0.83-0.96 ms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mirage_jax import _core
from mirage_jax.ir.graph import KernelGraph

# Costs within this fraction of the best contender's are a tie: the model's errors on the
# kernels it does rank apart are tens of percent (the README's ranking table).
COST_TIE = 0.02


def kernel_count(graph: KernelGraph) -> int:
    return sum(op.kind == "customized" for op in graph.ops)


def runs_loaded(graph: KernelGraph) -> float:
    """The contiguous runs a graph's generated kernels load their tiles in (all blocks, all
    iterations; cc/cost/block_graph_work.cc)."""
    # The count does not depend on the target; any valid one reads it out.
    kernels = _core.kernel_costs(graph._core, _core.Target.cpu_host())
    return sum(k["runs_loaded"] for k in kernels if k["customized"])


def tie_order(
    others: Sequence[tuple[KernelGraph, float | None]],
    runs: Callable[[KernelGraph], float] = runs_loaded,
) -> list[tuple[KernelGraph, float | None]]:
    """`others` (best first) with the candidates tied with the first (within COST_TIE)
    reordered by their runs loaded, fewest first; the rest as they were."""
    if not others or others[0][1] is None:
        return list(others)
    bar = others[0][1] * (1 + COST_TIE)
    tied = 0
    while tied < len(others) and others[tied][1] is not None and others[tied][1] <= bar:
        tied += 1
    head = sorted(others[:tied], key=lambda entry: runs(entry[0]))  # stable: model order
    return head + list(others[tied:])


def choose(
    ranked: Sequence[tuple[KernelGraph, float | None]],
    original: str,
    top_k: int,
    build_slots: int,
    runs: Callable[[KernelGraph], float] = runs_loaded,
) -> tuple[list[tuple[KernelGraph, float | None]], int]:
    """(the contenders, best first; how many of them joined as ties past top_k).

    ranked: the search's candidates with their costs, best first; original: the hash of the
    graph searched; build_slots: how many kernel libraries compile at once; runs: the tie
    order's key (runs_loaded)."""
    others = [(g, cost) for g, cost in ranked if g.hash() != original]
    if not others or others[0][1] is None:
        return others[:top_k], 0
    bar = others[0][1] * (1 + COST_TIE)
    others = tie_order(others, runs)
    chosen = others[:top_k]
    kernels = sum(kernel_count(g) for g, _ in chosen)
    tied = 0
    for graph, cost in others[top_k:]:
        if cost is None or cost > bar:
            break
        if kernels + kernel_count(graph) > build_slots:
            continue
        chosen.append((graph, cost))
        kernels += kernel_count(graph)
        tied += 1
    return chosen, tied

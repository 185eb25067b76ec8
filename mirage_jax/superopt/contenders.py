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
"""

from __future__ import annotations

from collections.abc import Sequence

from mirage_jax.ir.graph import KernelGraph

# Costs within this fraction of the best contender's are a tie: the model's errors on the
# kernels it does rank apart are tens of percent (the README's ranking table).
COST_TIE = 0.02


def kernel_count(graph: KernelGraph) -> int:
    return sum(op.kind == "customized" for op in graph.ops)


def choose(
    ranked: Sequence[tuple[KernelGraph, float | None]],
    original: str,
    top_k: int,
    build_slots: int,
) -> tuple[list[tuple[KernelGraph, float | None]], int]:
    """(the contenders, best first; how many of them joined as ties past top_k).

    ranked: the search's candidates with their costs, best first; original: the hash of the
    graph searched; build_slots: how many kernel libraries compile at once."""
    others = [(g, cost) for g, cost in ranked if g.hash() != original]
    chosen = others[:top_k]
    if not chosen or chosen[0][1] is None:
        return chosen, 0
    bar = chosen[0][1] * (1 + COST_TIE)
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

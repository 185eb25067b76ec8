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

Within such a tie, the candidates that stream less of their data a piece of each row at a
time come first (`cut_row_bytes`): a tile whose for-loop walks its tensor's innermost dim
reads each row in pieces, one per loop step, coming back to every row of the tile each
step. The model sees the same bytes either way; the machine does not. GPT-2's tied logits
`wte[8192, 768] @ x[768, 1]` (25 MB, measured cold, 2026-12-05): ten candidates within
0.3% in the model; the one reading whole rows ([128, 768] tiles) ran 0.72-0.80 ms, those
walking [128, 384] or [128, 256] tiles along the rows 1.0-1.2 ms, and the two the model's
own tie-break had picked ([2048, 48] and [2048, 32] tiles walked 16 and 24 times) 0.98-2.2
ms, XLA 0.83-0.96 ms. Only a stream that is a large share of its kernel's reads counts (the
activation of a GEMV walks its k in pieces too, from the cache): ordering by all contiguous
runs instead put GPT-2's bfloat16 QKV projection's [128, 1152] weight tiles in 2 blocks
(0.50 ms) before the whole-k [768, 288] tiles in 8 (0.38 ms), which walk the weight's rows,
not along them.

One more joins when every contender hands a matmul with a 16-bit float operand to XLA's
library: the best candidate that generates all its matmuls, if the model puts it within
WIDENED_DOT_SLACK of the best (`generated_alternative`). XLA widens such an operand into a
new float32 buffer before its dot, which the model prices as one pass at the memory's rate
(cc/cost/roofline.cc), the least it takes; the machine's handling of the new buffer's pages
can make it five times that: widening a [1024, 7808] bfloat16 weight to float32 took 1.7 ms,
a [1024, 7936] one (2% larger) 8.9 ms (benchmarks/widened_dots.py, 2026-12-06). Llama's
bfloat16 logits, [256, 1024] @ [1024, 8192], ran 31.8 ms under XLA and 31-34 ms as
library-dot candidates that the model (before the widening pass) put at 20.0 ms, ahead of
those generating the product (22.7 ms to the model, 24.7 ms run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mirage_jax import _core
from mirage_jax.ir.graph import KernelGraph

# Costs within this fraction of the best contender's are a tie (cc/cost/rank.h, kCostTie): the
# model's errors on the kernels it does rank apart are tens of percent (the ranking tables of
# docs/benchmark-history.md, "μGraph level"). The search's own order already puts its ties
# least-cut first (cc/search/result_set.cc).
COST_TIE: float = _core.COST_TIE
# How much more than the best contender a candidate that generates its matmuls may cost the
# model and still be timed beside contenders that all widen a 16-bit operand in XLA (above).
WIDENED_DOT_SLACK: float = 1.25
_SIXTEEN_BIT = ("bfloat16", "float16")


def kernel_count(graph: KernelGraph) -> int:
    return sum(op.kind == "customized" for op in graph.ops)


def cut_row_bytes(graph: KernelGraph) -> float:
    """The bytes a graph's generated kernels read from tiles that their for-loop walks along
    the tensor's innermost dim (a piece of every row per step), counting only the tiles that
    are at least a quarter of their kernel's reads (cc/cost/kernel_work.h, cut_row_bytes)."""
    return _core.cut_row_bytes(graph._core)


def tied_with_best(ranked: Sequence[tuple[KernelGraph, float | None]]) -> int:
    """How many of `ranked` (best first) the model cannot tell from the first: the leading
    candidates whose cost is within COST_TIE of the first's (none without costs;
    cc/cost/rank.h, tied_with_best)."""
    costs: list[float] = []
    for _, cost in ranked:
        if cost is None:
            break
        costs.append(cost)
    return _core.tied_with_best(costs)


def tie_order(
    others: Sequence[tuple[KernelGraph, float | None]],
    cut_rows: Callable[[KernelGraph], float] = cut_row_bytes,
) -> list[tuple[KernelGraph, float | None]]:
    """`others` (best first) with the candidates tied with the first (tied_with_best)
    reordered by `cut_rows` (cut_row_bytes), least first; the rest as they were."""
    tied = tied_with_best(others)
    head = sorted(others[:tied], key=lambda entry: cut_rows(entry[0]))  # stable: model order
    return head + list(others[tied:])


def distinct_code(
    ranked: Sequence[tuple[KernelGraph, float | None]], code_key: Callable[[KernelGraph], str]
) -> list[tuple[KernelGraph, float | None]]:
    """`ranked` (best first) without the candidates whose `code_key` (the backend's: equal
    for graphs it generates the same kernels for) an earlier one has: a loop cut into 4-row
    steps generates the 8-row cut's CPU kernel (cc/codegen/cpu/loop_steps.h), and timing
    both would spend a build and a contender's slot on noise."""
    seen: set[str] = set()
    kept = []
    for graph, cost in ranked:
        key = code_key(graph)
        if key not in seen:
            seen.add(key)
            kept.append((graph, cost))
    return kept


def choose(
    ranked: Sequence[tuple[KernelGraph, float | None]],
    original: str,
    top_k: int,
    build_slots: int,
    cut_rows: Callable[[KernelGraph], float] = cut_row_bytes,
) -> tuple[list[tuple[KernelGraph, float | None]], int]:
    """(the contenders, best first; how many of them joined as ties past top_k).

    ranked: the search's candidates with their costs, best first; original: the hash of the
    graph searched; build_slots: how many kernel libraries compile at once; cut_rows: the
    tie order's key (cut_row_bytes)."""
    others = [(g, cost) for g, cost in ranked if g.hash() != original]
    ties = tied_with_best(others)
    others = tie_order(others, cut_rows)
    chosen = others[:top_k]
    kernels = sum(kernel_count(g) for g, _ in chosen)
    tied = 0
    for graph, cost in others[top_k:ties]:
        if kernels + kernel_count(graph) > build_slots:
            continue
        chosen.append((graph, cost))
        kernels += kernel_count(graph)
        tied += 1
    return chosen, tied


def widens_in_library(graph: KernelGraph) -> bool:
    """Whether a kernel-level matmul of `graph` (run by XLA) takes a 16-bit float operand."""
    return any(
        op.kind == "matmul" and any(t.dtype in _SIXTEEN_BIT for t in op.inputs) for op in graph.ops
    )


def generates_every_matmul(graph: KernelGraph) -> bool:
    """Whether `graph` has matmuls and all of them are inside its generated kernels."""
    if any(op.kind == "matmul" for op in graph.ops):
        return False
    return any(
        any(inner.kind == "matmul" for inner in bg.ops)
        for op in graph.ops
        if (bg := op.block_graph) is not None
    )


def generated_alternative(
    ranked: Sequence[tuple[KernelGraph, float | None]],
    original: str,
    chosen: Sequence[tuple[KernelGraph, float | None]],
    build_slots: int,
    widens: Callable[[KernelGraph], bool] = widens_in_library,
    generates: Callable[[KernelGraph], bool] = generates_every_matmul,
) -> tuple[KernelGraph, float | None] | None:
    """The candidate to time besides `chosen` (choose's contenders) when each of them widens a
    16-bit operand in XLA's library: the best of `ranked` that generates every matmul and
    costs the model at most WIDENED_DOT_SLACK times the best contender and its kernels build
    at once (one more round of builds, where a tie must build beside the contenders: this one
    can win a region by a third, the logits' 31.8 -> 24.7 ms). None otherwise."""
    if not chosen or not all(widens(g) for g, _ in chosen):
        return None
    best = min((cost for _, cost in chosen if cost is not None), default=None)
    if best is None:
        return None
    timed = {g.hash() for g, _ in chosen}
    for graph, cost in ranked:
        if cost is None or cost > best * WIDENED_DOT_SLACK:
            break
        if graph.hash() in timed or graph.hash() == original or not generates(graph):
            continue
        if kernel_count(graph) <= build_slots:
            return graph, cost
    return None

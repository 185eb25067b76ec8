"""Splitting a program the search cannot fuse whole into a prefix and a tail, and splicing
candidates for the parts back together (the parts' joint search: parts.py).

The search's limits (kernel ops, block ops) are sized for one fused kernel. A program such as
qknorm_gqa (two norms, then attention) needs more ops than that in one kernel, and the
search of the whole finds nothing to fuse. Mirage partitions its input programs for the same
reason. Here the cut is made before the first matmul that reads a computed value (not a
program input): the prefix computes the values that cross the cut from the program's inputs,
and the tail is a program of its own over those values. Candidates for either part are
spliced back into a graph over the original inputs, which is then verified against the
original like any other candidate. Cut and splice are the C++ core's (cc/ir/subgraph.h);
this module decides nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mirage_jax import _core
from mirage_jax.ir.graph import KernelGraph


@dataclasses.dataclass(frozen=True)
class Split:
    tail: KernelGraph  # the ops from the cut on, over the values that cross the cut
    cut_tensor: int  # the first matmul's output (original tensor id), for reports
    boundary: tuple[int, ...]  # original tensor ids that are the tail's inputs, in order
    _core: _core.GraphSplit  # the C++ split (prefix included), for splice


def split_before_first_computed_matmul(kg: KernelGraph) -> Split | None:
    """The split of `kg`, or None when it has no such matmul, nothing before it to leave
    out, or no output made after it (an output made before the cut is computed by the
    prefix)."""
    split = _core.split_before_first_computed_matmul(kg._core)
    if split is None:
        return None
    return Split(KernelGraph._wrap(split.tail), split.cut_tensor, tuple(split.boundary), split)


def splice(split: Split, tail_candidate: KernelGraph) -> KernelGraph:
    """The original program with its tail replaced by `tail_candidate` (a graph over the
    tail's inputs, in order, such as a search result for split.tail)."""
    return KernelGraph._wrap(_core.splice(split._core, tail_candidate._core))


def prefix_program(split: Split) -> KernelGraph:
    """The prefix as a program of its own: the original's inputs, the ops before the cut, and
    as outputs the values crossing the cut that it computes, in boundary order."""
    return KernelGraph._wrap(_core.prefix_program(split._core))


def splice_parts(
    split: Split, prefix_candidate: KernelGraph, tail_candidate: KernelGraph
) -> KernelGraph:
    """The original program with both parts replaced: `prefix_candidate` a graph over the
    original's inputs computing prefix_program's outputs, `tail_candidate` as in splice."""
    return KernelGraph._wrap(
        _core.splice_parts(split._core, prefix_candidate._core, tail_candidate._core)
    )


def fold_prologues(graph: KernelGraph) -> KernelGraph | None:
    """`graph` with the kernel-level ops computing its fused kernels' inputs folded into
    their block graphs where the kernels' tiles allow (cc/ir/fold_prologue.h), or None when
    nothing folds. Not verified: the caller verifies it like any candidate."""
    folded = _core.fold_prologues(graph._core)
    return None if folded is None else KernelGraph._wrap(folded)


def split_kv(graph: KernelGraph, splits: Sequence[int]) -> list[KernelGraph]:
    """`graph` with its first online-softmax kernel in the split-KV form, once per count in
    `splits` that divides its for-loop into slices of two or more iterations
    (cc/ir/split_kv.h); [] when it has none. Not verified: the caller verifies each like any
    candidate."""
    return [KernelGraph._wrap(g) for g in _core.split_kv(graph._core, list(splits))]

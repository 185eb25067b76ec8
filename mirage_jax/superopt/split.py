"""Splitting a program the search cannot fuse whole into a prefix and a tail.

The search's limits (kernel ops, block ops) are sized for one fused kernel. A program such as
qknorm_gqa (two norms, then attention) needs more ops than that in one kernel, and the
search of the whole finds nothing to fuse. Mirage partitions its input programs for the same
reason. Here the cut is made before the first matmul that reads a computed value (not a
program input): the ops before it stay as they are (XLA fuses them), and the tail is searched
as a program of its own, whose inputs are the values that cross the cut. Each tail candidate
is spliced back behind the prefix into a graph over the original inputs, which is then
verified against the original like any other candidate.
"""

from __future__ import annotations

import dataclasses
import json

from mirage_jax.ir.graph import KernelGraph


@dataclasses.dataclass(frozen=True)
class Split:
    tail: KernelGraph  # the ops from the cut on, over the values that cross the cut
    cut_tensor: int  # the first matmul's output (original tensor id), for reports
    prefix_ops: tuple  # JSON ops of the original before the cut, its input ops included
    boundary: tuple  # original tensor ids that are the tail's inputs, in order


def split_before_first_computed_matmul(kg: KernelGraph) -> Split | None:
    """The split of `kg`, or None when it has no such matmul, nothing before it to leave
    out, or an output computed before the cut."""
    ops = json.loads(kg.to_json())["ops"]
    produced_by_input = {op["outputs"][0] for op in ops if op["kind"] == "input"}
    cut = next(
        (
            i
            for i, op in enumerate(ops)
            if op["kind"] == "matmul" and any(t not in produced_by_input for t in op["inputs"])
        ),
        None,
    )
    if cut is None:
        return None
    before, after = ops[:cut], ops[cut:]
    if all(op["kind"] == "input" for op in before):
        return None
    if any(op["kind"] == "output" for op in before):
        return None  # an output made before the cut: the tail would not produce them all
    made_before = {t for op in before for t in op.get("outputs", [])}
    boundary = []
    for op in after:
        for t in op.get("inputs", []):
            if t in made_before and t not in boundary:
                boundary.append(t)
    outputs = [op["inputs"][0] for op in after if op["kind"] == "output"]
    if any(t in made_before for t in outputs):
        return None  # an output passed through from before the cut
    tensors = {t.id: t for op in kg.ops for t in op.outputs}
    tail_ops = [
        {
            "kind": "input",
            "outputs": [t],
            "shape": list(tensors[t].shape),
            "dtype": tensors[t].dtype,
        }
        for t in boundary
    ]
    tail_ops += after
    tail = KernelGraph.from_json(_document(tail_ops))
    return Split(tail, ops[cut]["outputs"][0], tuple(before), tuple(boundary))


def splice(split: Split, tail_candidate: KernelGraph) -> KernelGraph:
    """The original program with its tail replaced by `tail_candidate` (a graph over the
    tail's inputs, in order, such as a search result for split.tail)."""
    ops = json.loads(tail_candidate.to_json())["ops"]
    # The candidate's own tensor ids, moved past every id of the prefix.
    offset = 1 + max(t for op in split.prefix_ops for t in op.get("outputs", []))
    inputs = [op["outputs"][0] for op in ops if op["kind"] == "input"]
    if len(inputs) != len(split.boundary):
        raise ValueError(
            f"splice: the candidate has {len(inputs)} inputs, the tail {len(split.boundary)}"
        )
    rename = dict(zip(inputs, split.boundary))

    def moved(t):
        return rename.get(t, t + offset)

    spliced = list(split.prefix_ops)
    for op in ops:
        if op["kind"] == "input":
            continue
        op = dict(op)  # a customized op's block graph keeps its own, block-local ids
        for key in ("inputs", "outputs"):
            if key in op:
                op[key] = [moved(t) for t in op[key]]
        spliced.append(op)
    return KernelGraph.from_json(_document(spliced))


def _document(ops) -> str:
    return json.dumps({"format": "mirage_jax.kernel_graph", "version": 1, "ops": list(ops)})

"""The bodies of scan and while loops and the branches of conds, optimized as functions of
their own.

Control flow is one node of the flattened program, so no region reaches into it: a model
whose layers run under `nn.scan` or `nnx.scan`, a decode loop under `fori_loop`, or a step
under `lax.cond`, kept every matmul inside one plain-JAX node. A body or branch is a closed
jaxpr of fixed shapes, so it is rewritten as a function is (its regions searched, its
rewritten form timed as a whole against jax.jit of it), and the node runs with the rewritten
one in its place.

One that won its own timing can still lose inside its loop, so the program around it is
timed as any rewritten program is. Called once, a body pays a call's fixed costs, and XLA's
share of them is larger; run 16 times over, each call's operands are still in the caches from
the one before: a layer of RMSNorm + Linear + SiLU ([8, 1024] x [1024, 1024]) whose kernel beat
XLA's body 1.19x alone ran 0.80-0.87x of jax.jit under `scan`. That timing runs on random
floats and zero integers (rewrite/whole_program.py): a while loop whose trip count comes from
the arguments may not run at all, and a cond takes its first branch, so a kernel elsewhere
shows no gain there and the node keeps its own.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.extend.core as jcore

from mirage_jax.frontend.flat import CONTROL_FLOW, FlatProgram, Node, sub_programs
from mirage_jax.frontend.partition import partition
from mirage_jax.frontend.region import Partition
from mirage_jax.rewrite.explain import RegionReport, describe_sources


@dataclasses.dataclass(frozen=True)
class BodySignature:
    """What the function rewrite reads of a signature: the body's argument types."""

    avals: list


@dataclasses.dataclass
class Rewritten:
    """One control-flow node of a program with its bodies (or branches) rewritten."""

    node: Node
    labels: list[str]  # per body: "function: scan body at file:line (fn)"
    specs: list[Any]  # per body: its specialization (rewrite/decorator.py _Specialization)
    kept: bool  # some rewritten body runs: it beat jax.jit of that body as a whole
    params: dict[str, Any]  # the node's params with the rewritten bodies that are kept
    reports: list[RegionReport]

    def rebound(self) -> Node:
        """The node running its rewritten bodies."""
        return dataclasses.replace(self.node, params=self.params)

    def notes(self) -> list[str]:
        """Each body's whole-program timing, named by its place."""
        return [
            f"{label.split(': ', 1)[-1]}: {spec.note}"
            for label, spec in zip(self.labels, self.specs)
            if spec.note
        ]

    def left_out(self) -> list[str]:
        return [line for spec in self.specs for line in spec.left_out]


def _shape(aval: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _label(where: str, node: Node, i: int, of: int) -> str:
    at = f" at {describe_sources([node.source])}" if node.source else ""
    what = f"{node.name} body"
    if node.name == "cond":  # lax.cond(pred, ...) holds its false branch first
        what = f"cond branch {i}" + (f" ({('false', 'true')[i]})" if of == 2 else "")
    return f"{where}: {what}{at}"


# Partitions by id of the ClosedJaxpr, with the jaxpr kept alive so that its id stays its own:
# the budget counts the regions of every body before any is rewritten, and each rewrite
# then reuses the partition counted (one memo per function being optimized).
Partitions = dict[int, tuple[jcore.ClosedJaxpr, Partition]]


def partition_of(closed: jcore.ClosedJaxpr, memo: Partitions) -> Partition:
    """`closed` partitioned, once per `memo`."""
    hit = memo.get(id(closed))
    if hit is None:
        hit = memo[id(closed)] = (closed, partition(closed))
    return hit[1]


def region_count(part: Partition, memo: Partitions) -> int:
    """The regions of `part` and of every body nested in it, at any depth."""
    return len(part.regions) + sum(_body_regions(node, memo) for node in part.program.nodes)


def _body_regions(node: Node, memo: Partitions) -> int:
    if node.name not in CONTROL_FLOW:
        return 0
    return sum(region_count(partition_of(b, memo), memo) for b in sub_programs(node))


def budget_shares(part: Partition, budget_s: float, memo: Partitions) -> dict[int, float]:
    """The function's optimization budget shared by region count (nested bodies included)
    between `part`'s own regions and each control-flow node's bodies (by node index; key -1:
    the program's own), so that a function with loops spends what optimize(budget_s=) says,
    not that per loop."""
    counts = {-1: len(part.regions)}
    for node in part.program.nodes:
        if node.name in CONTROL_FLOW:
            counts[node.index] = _body_regions(node, memo)
    total = sum(counts.values())
    return {k: budget_s * n / total if total else budget_s for k, n in counts.items()}


def rewrite_control_flow(
    program: FlatProgram,
    rewrite: Callable[..., Any],
    settings: Any,
    where: str,
    shares: dict[int, float],
    memo: Partitions,
) -> dict[int, Rewritten]:
    """Every control-flow node of `program` with its bodies rewritten, by node index.
    `rewrite` is the function rewrite (decorator._rewrite), called on each body with
    `settings`, the node's budget of `shares` (budget_shares) split among its bodies, and
    `memo`; a body whose rewrite fails keeps its own, with a warning (it runs as jax.jit
    would)."""
    done: dict[int, Rewritten] = {}
    for node in program.nodes:
        if node.name not in CONTROL_FLOW or not shares.get(node.index):
            continue
        bodies = sub_programs(node)
        settings_each = dataclasses.replace(settings, budget_s=shares[node.index] / len(bodies))
        labels, specs, new_bodies, reports = [], [], [], []
        for i, closed in enumerate(bodies):
            label = _label(where, node, i, len(bodies))
            spec, body = _rewrite_one(closed, rewrite, settings_each, label, memo)
            kept = body is not closed
            new_bodies.append(body)
            if spec is not None:
                labels.append(label)
                specs.append(spec)
                reports += _reports(spec, kept, label)
        if not specs:
            continue
        param = CONTROL_FLOW[node.name]
        params = dict(node.params)
        params[param] = tuple(new_bodies) if node.name == "cond" else new_bodies[0]
        kept = any(b is not c for b, c in zip(new_bodies, bodies))
        done[node.index] = Rewritten(node, labels, specs, kept, params, reports)
    return done


def _rewrite_one(
    closed: jcore.ClosedJaxpr,
    rewrite: Callable[..., Any],
    settings: Any,
    label: str,
    memo: Partitions,
) -> tuple[Any, jcore.ClosedJaxpr]:
    """(the body's specialization or None where it failed, the body to run: the rewritten
    one where it was kept, else `closed` itself)."""
    avals = [_shape(a) for a in closed.in_avals]
    out_shapes = [_shape(a) for a in closed.out_avals]
    plain = jcore.jaxpr_as_fun(closed)
    try:
        spec = rewrite(closed, out_shapes, BodySignature(avals), plain, settings, label, memo)
        if spec.run is plain or not spec.whole_program_kept:
            return spec, closed
        return spec, jax.make_jaxpr(spec.run)(*avals)
    except Exception as e:  # the node keeps its own body: never wrong
        warnings.warn(
            f"mirage_jax.optimize: {label} runs as jax.jit, not rewritten: {type(e).__name__}: {e}",
            RuntimeWarning,
            stacklevel=3,
        )
        return None, closed


def _reports(spec: Any, kept: bool, label: str) -> list[RegionReport]:
    """The body's region reports as the enclosing function's explain() shows them: each
    names its body, and a kernel the body as a whole did not keep is reported as XLA."""
    out = []
    for report in spec.reports:
        reason = f"in the {label.split(': ', 1)[-1]}: {report.reason}"
        chosen = report.chosen
        if chosen == "kernel" and not kept:
            chosen = "xla"
            reason += "; the body as a whole was not faster with its kernels"
        out.append(dataclasses.replace(report, chosen=chosen, reason=reason))
    return out

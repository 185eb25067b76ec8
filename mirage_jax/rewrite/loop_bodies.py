"""The bodies of scan and while loops, optimized as functions of their own.

A loop is one node of the flattened program, so no region reaches into it: a model whose
layers run under `nn.scan` or `nnx.scan`, or a decode loop under `fori_loop`, kept every
matmul inside one plain-JAX node. A loop body is a closed jaxpr of fixed shapes, so it is
rewritten as a function is (its regions searched, its rewritten form timed as a whole
against jax.jit of the body), and the loop runs with the rewritten body in place of its own.

A body that won its own timing can still lose inside its loop, so the program around it is
timed as any rewritten program is. Called once, a body pays a call's fixed costs, and XLA's
share of them is larger; run 16 times over, each call's operands are still in the caches from
the one before: a layer of RMSNorm + Linear + SiLU ([8, 1024] x [1024, 1024]) whose kernel beat
XLA's body 1.19x alone ran 0.80-0.87x of jax.jit under `scan`. A while loop whose trip count
comes from the arguments is timed on zeros (rewrite/whole_program.py), where it may not run at
all: its body's kernels then show no gain, and the loop keeps its own body.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.extend.core as jcore

from mirage_jax.frontend.flat import LOOP_BODIES, FlatProgram, Node
from mirage_jax.frontend.partition import partition
from mirage_jax.rewrite.explain import RegionReport, describe_sources


@dataclasses.dataclass(frozen=True)
class BodySignature:
    """What the function rewrite reads of a signature: the body's argument types."""

    avals: list


@dataclasses.dataclass
class LoopBody:
    """One loop of a program with its body rewritten."""

    node: Node
    label: str  # "function: scan body at file:line (fn)"
    spec: Any  # the body's specialization (rewrite/decorator.py _Specialization)
    kept: bool  # the rewritten body runs: it beat jax.jit of the body as a whole
    params: dict[str, Any]  # the loop's params with the rewritten body (node.params if not kept)
    reports: list[RegionReport]

    def rebound(self) -> Node:
        """The loop's node running the rewritten body."""
        return dataclasses.replace(self.node, params=self.params)


def _shape(aval: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _label(where: str, node: Node) -> str:
    at = f" at {describe_sources([node.source])}" if node.source else ""
    return f"{where}: {node.name} body{at}"


def budget_shares(program: FlatProgram, regions: int, budget_s: float) -> dict[int, float]:
    """The function's optimization budget shared by region count between the program's own
    `regions` and each loop body's (by the loop's node index; key -1: the program's own), so
    that a function with loops spends what optimize(budget_s=) says, not that per loop."""
    counts = {-1: regions}
    for node in program.nodes:
        param = LOOP_BODIES.get(node.name)
        if param is not None:
            counts[node.index] = len(partition(node.params[param]).regions)
    total = sum(counts.values())
    return {k: budget_s * n / total if total else budget_s for k, n in counts.items()}


def rewrite_bodies(
    program: FlatProgram,
    rewrite: Callable[..., Any],
    settings: Any,
    where: str,
    shares: dict[int, float],
) -> dict[int, LoopBody]:
    """The rewritten body of every loop of `program`, by the loop's node index. `rewrite` is
    the function rewrite (decorator._rewrite), called on each body with `settings` and the
    body's budget of `shares` (budget_shares); a body whose rewrite fails keeps its own, with
    a warning (the loop runs as jax.jit would)."""
    bodies: dict[int, LoopBody] = {}
    for node in program.nodes:
        param = LOOP_BODIES.get(node.name)
        if param is None or not shares.get(node.index):
            continue
        closed: jcore.ClosedJaxpr = node.params[param]
        body_settings = dataclasses.replace(settings, budget_s=shares[node.index])
        avals = [_shape(a) for a in closed.in_avals]
        out_shapes = [_shape(a) for a in closed.out_avals]
        plain = jcore.jaxpr_as_fun(closed)
        label = _label(where, node)
        try:
            spec = rewrite(closed, out_shapes, BodySignature(avals), plain, body_settings, label)
            kept = spec.run is not plain and spec.whole_program_kept
            params = dict(node.params)
            if kept:
                params[param] = jax.make_jaxpr(spec.run)(*avals)
        except Exception as e:  # the loop keeps its own body: never wrong
            warnings.warn(
                f"mirage_jax.optimize: {label} runs as jax.jit, not rewritten: "
                f"{type(e).__name__}: {e}",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        bodies[node.index] = LoopBody(node, label, spec, kept, params, _reports(spec, kept, label))
    return bodies


def _reports(spec: Any, kept: bool, label: str) -> list[RegionReport]:
    """The body's region reports as the enclosing function's explain() shows them: each
    names its loop, and a kernel the body as a whole did not keep is reported as XLA."""
    out = []
    for report in spec.reports:
        reason = f"in the {label.split(': ', 1)[-1]}: {report.reason}"
        chosen = report.chosen
        if chosen == "kernel" and not kept:
            chosen = "xla"
            reason += "; the loop body as a whole was not faster with its kernels"
        out.append(dataclasses.replace(report, chosen=chosen, reason=reason))
    return out

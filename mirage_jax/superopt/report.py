"""The text Superoptimized.report() returns: what was searched and found, how the choice was
verified, and the timings."""

from __future__ import annotations

import math
from typing import Any

from mirage_jax.ir.graph import KernelGraph
from mirage_jax.runtime import cuda_roofline
from mirage_jax.superopt.contenders import COST_TIE
from mirage_jax.superopt.verify import VerifyResult

XLA = "xla"  # the timings key of the original graph run by XLA


def original(kg: KernelGraph) -> str:
    """What runs when no candidate is chosen."""
    if any(op.kind == "customized" for op in kg.ops):
        return "the graph as given (its own kernels, the rest with XLA)"
    return "the original graph with XLA"


def text(run: Any, chosen: KernelGraph, speedup: float) -> str:
    """The report of one superoptimize call (`run`: its superoptimize._Run)."""
    lines = [
        f"superoptimize {run.kg.label} (hash {run.kg.hash()}), backend "
        f"{run.backend}, target {run.config.target}",
        f"search: {run.search_note}",
    ]
    if run.result is not None:
        found = len(run.result.candidates)
        others = sum(c.hash() != run.kg.hash() for c in run.result.candidates)
        tied = (
            f", with {run.tied} more it could not tell from the best (within {COST_TIE:.0%}; "
            "of such ties, those reading least along rows first)"
            if run.tied
            else ""
        )
        generated = (
            ", with the best that generates its matmuls (the others widen a 16-bit operand "
            "in XLA, whose cost the model cannot see)"
            if run.generated_alternative
            else ""
        )
        lines.append(
            f"candidates: {found} verified by the search; the cost model's best "
            f"{min(run.top_k, others)} besides the original{tied}{generated} were timed, "
            "and the original"
        )
    if chosen is run.kg:
        lines.append(
            f"chosen: {original(run.kg)} (no candidate that survived the checks was faster)"
        )
    else:
        kernels = [bg for op in chosen.ops if (bg := op.block_graph) is not None]
        shapes = ", ".join(f"grid {bg.grid} for-loop {bg.forloop_range}" for bg in kernels)
        lines.append(
            f"chosen: candidate {chosen.hash()}, {len(kernels)} generated "
            f"kernel(s) ({shapes or 'kernel-level ops only'})"
        )
        if run.backend == "cuda":
            lines += cuda_roofline.roofline_lines(chosen, run.config.target)
        lines.append(f"verification: {describe_verification(run.verification)}")
        lines.append(
            f"float check at full size vs XLA's output of the original on random "
            f"data: {run.float_check}"
        )
        lines.append(
            f"adversarial float checks (huge logits, masks, zeros, NaN/Inf): passed "
            f"({run.adversarial})"
        )
    cold = f", caches cold: {len(run.arg_sets)} input sets in turn" if run.arg_sets else ""
    lines.append(f"timings (median of {run.rounds} alternating rounds, device arrays{cold}):")
    for name, seconds in sorted(run.timings.items(), key=lambda kv: kv[1]):
        label = "xla (the original graph)" if name == XLA else name
        cost = run.costs.get(name)
        estimate = f"  (cost model: {cost * 1e3:.3f} ms)" if cost is not None else ""
        mark = "  <- chosen" if name == (XLA if chosen is run.kg else chosen.hash()) else ""
        lines.append(f"  {label:<34} {seconds * 1e3:9.3f} ms{estimate}{mark}")
    lines.append(f"speedup over XLA: {speedup:.2f}x")
    if run.decision is not None:
        lines.append(f"decision (paired bootstrap of the time ratio): {run.decision.describe()}")
    for name, why in run.dropped:
        lines.append(f"dropped {name}: {why}")
    if chosen is not run.kg:
        lines.append(f"chosen graph:\n{chosen}")
    return "\n".join(lines)


def runner_up_text(
    decision: str, graph: KernelGraph, verification: VerifyResult, checks: str
) -> str:
    """What the runner-up (superoptimize.Superoptimized.runner_up) showed alone, how it was
    checked, and its graph."""
    return "\n".join(
        [
            f"its region's own timing: {decision}",
            f"verification: {describe_verification(verification)}",
            checks,
            f"runner-up graph:\n{graph}",
        ]
    )


def describe_verification(verdict: VerifyResult) -> str:
    bound = math.log2(verdict.false_accept_bound) if verdict.false_accept_bound > 0 else -math.inf
    shrunk = (
        "on a shrunk instance (same grids and for-loops, tiny tiles)"
        if verdict.shrunk
        else "at full size"
    )
    return (
        f"equivalent to the original by finite-field fingerprints, {verdict.trials} "
        f"trials {shrunk}, false-accept bound 2^{bound:.1f}"
    )


def loaded_text(run: Any, chosen: KernelGraph, speedup: float) -> str:
    """The report of a superoptimize call that followed a stored verdict (`run.loaded`)."""
    v = run.loaded
    lines = [
        f"superoptimize {run.kg.label} (hash {run.kg.hash()}), backend "
        f"{run.backend}, target {run.config.target}",
        f"verdict: loaded from the verdict cache, measured {v.get('measured_at', '?')} on "
        f"{v.get('host', '?')} (no search, no timing in this process)",
    ]
    if v.get("decision"):
        lines.append(f"decision when measured: {v['decision']}")
    if chosen is run.kg:
        lines.append(f"chosen: {original(run.kg)} (the stored verdict)")
    else:
        kernels = [bg for op in chosen.ops if (bg := op.block_graph) is not None]
        lines.append(f"chosen: candidate {chosen.hash()}, {len(kernels)} generated kernel(s)")
        lines.append(f"verification (run again now): {describe_verification(run.verification)}")
        checks = v.get("checks") or {}
        lines.append(
            f"float checks: not run again; they passed when the verdict was measured "
            f"(float check: {checks.get('float_check', '?')}; adversarial: "
            f"{checks.get('adversarial', '?')})"
        )
    lines.append("timings when measured (medians):")
    for name, seconds in sorted(run.timings.items(), key=lambda kv: kv[1]):
        label = "xla (the original graph)" if name == XLA else name
        lines.append(f"  {label:<34} {seconds * 1e3:9.3f} ms")
    lines.append(f"speedup over XLA: {speedup:.2f}x")
    if chosen is not run.kg:
        lines.append(f"chosen graph:\n{chosen}")
    return "\n".join(lines)

"""Each generated CUDA kernel's share of a GPU's roofline, estimated from its plan without a
GPU (cc/codegen/cuda/roofline_estimate.h says how): what explain() prints for a region on
the cuda backend, and `python -m mirage_jax cuda-plan` for the paper's programs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mirage_jax import _core
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.runtime import toolchain

TARGETS = ("a100", "h100", "h200")


def target_for(name: str | None) -> str:
    """A GPU preset for a search target or device kind ("h100", "NVIDIA H200", "cpu"...):
    the named one, else H100."""
    text = (name or "").lower()
    return next((t for t in TARGETS if t in text), "h100")


def kernel_estimates(
    kg: KernelGraph,
    target: str = "h100",
    archs: Sequence[str] | None = None,
    tf32: bool | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """(op index, estimate dict) for every customized op of `kg`, planned as mj.compile
    would plan it for `archs` (default: the target architectures)."""
    limit = toolchain.shared_memory_limit(archs or toolchain.target_archs())
    tf32 = toolchain.tf32_allowed() if tf32 is None else tf32
    return [
        (
            op.index,
            _core.cuda_kernel_estimate(op.block_graph._core, limit, tf32, target_for(target)),
        )
        for op in kg.ops
        if op.block_graph is not None
    ]


def roofline_lines(kg: KernelGraph, target: str | None = None) -> list[str]:
    """One line per kernel, for reports."""
    lines = []
    for index, e in kernel_estimates(kg, target_for(target)):
        lines.append(f"  kernel (op {index}) {e['text']}")
    if lines:
        lines.insert(0, "roofline estimate from the plan (static, no GPU timing):")
    return lines

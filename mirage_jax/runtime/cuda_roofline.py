"""Each generated CUDA kernel's share of a GPU's roofline, estimated from its plan without a
GPU (cc/codegen/cuda/roofline_estimate.h says how): what explain() prints for a region on
the cuda backend, and `python -m mirage_jax cuda-plan` for the paper's programs."""

from __future__ import annotations

TARGETS = ("a100", "h100", "h200")


def target_for(name: str | None) -> str:
    """A GPU preset for a search target or device kind ("h100", "NVIDIA H200", "cpu"...):
    the named one, else H100."""
    text = (name or "").lower()
    return next((t for t in TARGETS if t in text), "h100")


def kernel_estimates(kg, target: str = "h100", archs=None, tf32: bool | None = None) -> list:
    """(op index, estimate dict) for every customized op of `kg`, planned as mj.compile
    would plan it for `archs` (default: the target architectures)."""
    from mirage_jax import _core
    from mirage_jax.runtime import cuda_compiler

    limit = cuda_compiler.shared_memory_limit(archs or cuda_compiler.target_archs())
    tf32 = cuda_compiler.tf32_allowed() if tf32 is None else tf32
    return [(op.index, _core.cuda_kernel_estimate(op.block_graph._core, limit, tf32,
                                                  target_for(target)))
            for op in kg.ops if op.kind == "customized"]


def roofline_lines(kg, target: str | None = None) -> list[str]:
    """One line per kernel, for reports."""
    lines = []
    for index, e in kernel_estimates(kg, target_for(target)):
        lines.append(f"  kernel (op {index}) {e['text']}")
    if lines:
        lines.insert(0, "roofline estimate from the plan (static, no GPU timing):")
    return lines

"""python -m mirage_jax cuda-plan: how the CUDA generator plans the paper's programs, and
each kernel's estimated share of a GPU's roofline (occupancy, waves, bytes in flight, the
tensor-core share), from the plan alone: no GPU, no nvcc needed."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from mirage_jax.ir.paper_graphs import PROGRAMS
from mirage_jax.runtime import cuda_roofline, toolchain


def add_parser(commands: argparse._SubParsersAction) -> None:
    plan = commands.add_parser(
        "cuda-plan",
        help="the CUDA plan of the paper's programs and each kernel's estimated share of a "
        "GPU's roofline (no GPU needed)",
    )
    plan.add_argument(
        "programs",
        nargs="*",
        metavar="PROGRAM",
        help="paper programs (default: all), e.g. rmsnorm_linear gqa_decode",
    )
    plan.add_argument("--target", choices=list(cuda_roofline.TARGETS), default="h100")
    plan.add_argument(
        "--dtype",
        action="append",
        choices=["bfloat16", "float32", "float16"],
        help="repeat for several (default: bfloat16 and float32)",
    )
    plan.add_argument("--small", action="store_true", help="the small test shapes")
    plan.add_argument(
        "--no-tf32",
        action="store_true",
        help="float32 matmuls at full precision (CUDA-core FMA), as under "
        "jax.default_matmul_precision('highest')",
    )


def run(args: argparse.Namespace) -> int:
    return run_cuda_plan(
        args.programs,
        args.target,
        args.dtype or ["bfloat16", "float32"],
        args.small,
        not args.no_tf32,
        args.cuda_arch,
    )


def run_cuda_plan(
    programs: Sequence[str],
    target: str,
    dtypes: Sequence[str],
    small: bool,
    tf32: bool,
    archs: str | None,
) -> int:
    unknown = [p for p in programs if p not in PROGRAMS]
    if unknown:
        print(
            f"python -m mirage_jax cuda-plan: unknown program(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(PROGRAMS))}"
        )
        return 2
    targets = toolchain.parse_archs(archs) if archs else toolchain.DEFAULT_ARCHS
    print(
        f"target {target}, architectures {','.join(targets)}, TF32 "
        f"{'allowed' if tf32 else 'not allowed'} for float32 matmuls, "
        f"{'small' if small else 'paper'} shapes"
    )
    for name in programs or sorted(PROGRAMS):
        program = PROGRAMS[name]
        for dtype in dtypes:
            _, fused = program.build(**(program.small if small else {}), dtype=dtype)
            print(f"\n{name} {dtype}: {program.description}")
            for index, e in cuda_roofline.kernel_estimates(fused, target, targets, tf32):
                print(f"  op {index}: {e['text']}")
    return 0

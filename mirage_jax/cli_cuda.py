"""python -m mirage_jax cuda-plan: how the CUDA generator plans the paper's programs, and
each kernel's estimated share of a GPU's roofline (occupancy, waves, bytes in flight, the
tensor-core share), from the plan alone: no GPU, no nvcc needed."""

from __future__ import annotations


def run_cuda_plan(programs, target: str, dtypes, small: bool, tf32: bool, archs) -> int:
    from mirage_jax.paper_graphs import PROGRAMS
    from mirage_jax.runtime import cuda_compiler, cuda_roofline

    unknown = [p for p in programs if p not in PROGRAMS]
    if unknown:
        print(f"python -m mirage_jax cuda-plan: unknown program(s) {', '.join(unknown)}; "
              f"known: {', '.join(sorted(PROGRAMS))}")
        return 2
    archs = cuda_compiler.parse_archs(archs) if archs else cuda_compiler.DEFAULT_ARCHS
    print(f"target {target}, architectures {','.join(archs)}, TF32 "
          f"{'allowed' if tf32 else 'not allowed'} for float32 matmuls, "
          f"{'small' if small else 'paper'} shapes")
    for name in programs or sorted(PROGRAMS):
        program = PROGRAMS[name]
        for dtype in dtypes:
            _, fused = program.build(**(program.small if small else {}), dtype=dtype)
            print(f"\n{name} {dtype}: {program.description}")
            for index, e in cuda_roofline.kernel_estimates(fused, target, archs, tf32):
                print(f"  op {index}: {e['text']}")
    return 0

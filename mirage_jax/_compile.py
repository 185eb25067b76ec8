"""generate_code and compile: a KernelGraph's customized ops as generated kernels, the rest
as lax ops (DESIGN.md §5.3, §6)."""

from __future__ import annotations

from collections.abc import Callable

from mirage_jax import _core
from mirage_jax.graph import KernelGraph

BACKENDS = ("cpu", "cuda")


def _check_backend(backend: str, what: str) -> None:
    if backend not in BACKENDS:
        raise NotImplementedError(
            f"{what}: backend {backend!r} is not supported (available: 'cpu', 'cuda')"
        )


def _check_graph(kg, what: str) -> None:
    if not isinstance(kg, KernelGraph):
        raise TypeError(f"{what}: expected a mirage_jax KernelGraph, got {type(kg).__name__}")


def _cpu_kernels(kg: KernelGraph) -> dict[int, tuple[str, str]]:
    """op index -> (handler symbol, source) for every customized op of kg."""
    kernels = {}
    for op in kg.ops:
        if op.kind != "customized":
            continue
        bg = op.block_graph._core
        symbol = _core.cpu_kernel_symbol(bg)
        kernels[op.index] = (symbol, _core.generate_cpu_kernel(bg, symbol))
    return kernels


def _cuda_kernels(kg: KernelGraph) -> dict[int, tuple[str, str]]:
    """op index -> (handler symbol, CUDA source) for every customized op of kg, with shared
    memory planned for the smallest limit of the target architectures and visible GPUs, loops
    split over more blocks where the grid leaves the GPU's SMs idle, and float32 matmuls on
    TF32 tensor cores where jax's matmul precision allows it. The symbol names the plan's
    inputs too: a process may compile one block graph several ways."""
    from mirage_jax.runtime import cuda_compiler

    limit = cuda_compiler.shared_memory_limit(cuda_compiler.target_archs())
    tf32 = cuda_compiler.tf32_allowed()
    sms = cuda_compiler.sm_count()
    kernels = {}
    for op in kg.ops:
        if op.kind != "customized":
            continue
        bg = op.block_graph._core
        symbol = f"{_core.cuda_kernel_symbol(bg)}_s{limit}_m{sms}{'_tf32' if tf32 else ''}"
        kernels[op.index] = (symbol, _core.generate_cuda_kernel(bg, symbol, limit, tf32, sms))
    return kernels


def _kernels(kg: KernelGraph, backend: str) -> dict[int, tuple[str, str]]:
    return _cuda_kernels(kg) if backend == "cuda" else _cpu_kernels(kg)


def generate_code(kg: KernelGraph, backend: str = "cpu") -> str:
    """The generated source of every customized op of `kg`, as one translation unit (each
    kernel once, in op order; empty when kg has no customized op)."""
    _check_graph(kg, "generate_code")
    _check_backend(backend, "generate_code")
    units = dict(_kernels(kg, backend).values())  # equal block graphs share a symbol
    return "\n".join(units.values())


def compile(kg: KernelGraph, backend: str = "cpu") -> Callable:  # noqa: A001 (public API name)
    """A function of jax arrays, one per input of `kg` in order, returning a tuple with one
    array per output. Usable eagerly or inside jax.jit: predefined ops run as lax ops and each
    customized op is one XLA FFI custom call to its generated, compiled kernel. Kernels are
    compiled here (or found in the cache, see mirage_jax.runtime), not when it is called."""
    _check_graph(kg, "compile")
    _check_backend(backend, "compile")
    # jax loads here, not on `import mirage_jax`: building and searching graphs need no jax.
    import jax

    from mirage_jax._lower import lower_kernel_graph
    from mirage_jax.runtime import register_cpu_target, shared_library_for

    targets = {}
    result_types = {}
    for op in kg.ops:
        if op.kind == "customized":
            result_types[op.index] = [jax.ShapeDtypeStruct(t.shape, t.dtype) for t in op.outputs]
    if backend == "cuda":
        from mirage_jax.runtime import cuda_compiler, cuda_library_for, register_cuda_target

        from concurrent.futures import ThreadPoolExecutor

        archs = cuda_compiler.target_archs()
        kernels = _cuda_kernels(kg)
        # nvcc takes seconds a kernel: build a graph's kernels side by side.
        with ThreadPoolExecutor(max_workers=max(1, min(len(kernels), 4))) as pool:
            libraries = dict(zip(kernels, pool.map(
                lambda kernel: cuda_library_for(kernel[1], archs), kernels.values())))
        for index, (symbol, _) in kernels.items():
            targets[index] = register_cuda_target(symbol, libraries[index])
    else:
        for index, (symbol, source) in _cpu_kernels(kg).items():
            targets[index] = register_cpu_target(symbol, shared_library_for(source))

    def lower_customized(index, args):
        call = jax.ffi.ffi_call(targets[index], result_types[index], vmap_method="sequential")
        return call(*args)

    return lower_kernel_graph(kg, lower_customized)

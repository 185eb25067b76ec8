"""One Backend record per target a KernelGraph's customized ops can be compiled for.

A record says how a block graph becomes source code (the C++ code generator's entry points
in mirage_jax._core), how that source becomes a shared library (mirage_jax/runtime/
toolchain.py), what the library's cache key covers, and on which XLA FFI platform its
handlers register. compile.py, kernel_cache.py and ffi_targets.py read only these records,
so adding a backend is adding a record (and its code generator in cc/codegen).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirage_jax import _core
from mirage_jax.runtime import precompiled_header, toolchain


@dataclass(frozen=True)
class Backend:
    name: str  # as users pass it: backend="cpu"
    platform: str  # the XLA FFI platform its handlers register on
    cache_kind: str  # the kind of its kernel cache entries (python -m mirage_jax cache list)
    cache_directory: str  # under the cache root
    source_name: str  # of the generated source in a cache entry
    # (C++ block graph, the options of one compilation) -> (handler symbol, source)
    generate: Callable[[Any, dict[str, Any]], tuple[str, str]]
    # The options one compilation shares between generating, keying and building.
    options: Callable[[], dict[str, Any]]
    # How a library is built (compiler, flags, target architectures): its cache key covers
    # all of it, and its cache entry records it.
    built_with: Callable[[dict[str, Any]], dict[str, Any]]
    # Compiles a source file into a shared library.
    build: Callable[[Path, Path, dict[str, Any]], None]
    # At most this many of one graph's kernels are compiled side by side.
    parallel_builds: int = 1
    # (C++ kernel graph) -> a key equal for graphs this backend generates the same code
    # for (a candidate whose key another one has adds nothing to time); the content hash
    # where the generator adds no equivalences of its own.
    code_key: Callable[[Any], str] = lambda graph: graph.hash()


def _cpu_generate(block_graph: Any, options: dict[str, Any]) -> tuple[str, str]:
    symbol = _core.cpu_kernel_symbol(block_graph)
    return symbol, _core.generate_cpu_kernel(block_graph, symbol)


def _cuda_options() -> dict[str, Any]:
    archs = toolchain.target_archs()
    try:
        toolkit: str | None = toolchain.toolkit_version()
    except toolchain.KernelCompileError:
        toolkit = None  # no nvcc here: only a library a build machine shipped can be used
    return {
        "archs": archs,
        # Shared memory is planned for the smallest limit of the target architectures and
        # of the visible GPUs.
        "shared_memory": toolchain.shared_memory_limit(archs),
        # Loops split over more blocks where the grid leaves the GPU's SMs idle.
        "sms": toolchain.sm_count(),
        # float32 matmuls on TF32 tensor cores where jax's matmul precision allows it.
        "tf32": toolchain.tf32_allowed(),
        "toolkit": toolkit,
    }


def _cuda_generate(block_graph: Any, options: dict[str, Any]) -> tuple[str, str]:
    # The symbol names the plan's inputs too: a process may compile one block graph several
    # ways.
    limit, sms, tf32 = options["shared_memory"], options["sms"], options["tf32"]
    symbol = f"{_core.cuda_kernel_symbol(block_graph)}_s{limit}_m{sms}{'_tf32' if tf32 else ''}"
    return symbol, _core.generate_cuda_kernel(block_graph, symbol, limit, tf32, sms)


def _cuda_built_with(options: dict[str, Any]) -> dict[str, Any]:
    """nvcc, its flags and the architectures (with the PTX embedded), and the toolkit with
    the minimum driver it implies (None without nvcc: kernel_cache then looks for a library
    built elsewhere)."""
    toolkit = options["toolkit"]
    return {
        "compiler": toolchain.NVCC,
        "flags": list(toolchain.NVCC_FLAGS),
        "archs": list(options["archs"]),
        "ptx": toolchain.ptx_arch(options["archs"]),
        "toolkit": toolkit,
        "min_driver": None if toolkit is None else toolchain.minimum_driver(toolkit),
    }


CPU = Backend(
    name="cpu",
    platform="cpu",
    cache_kind="kernel",
    cache_directory="kernels",
    source_name="kernel.cc",
    generate=_cpu_generate,
    options=dict,
    built_with=lambda options: {
        "compiler": toolchain.GXX,
        "flags": list(toolchain.GXX_FLAGS),
        "isa": toolchain.native_isa(),
    },
    build=lambda source, library, options: precompiled_header.compile_cpu_library(source, library),
    # Loops whose steps are shorter than their products take run several steps an
    # iteration (cc/codegen/cpu/loop_steps.h): finer cuts of k generate the same kernel.
    code_key=_core.cpu_code_hash,
)

CUDA = Backend(
    name="cuda",
    platform="CUDA",
    cache_kind="cuda_kernel",
    cache_directory="cuda_kernels",
    source_name="kernel.cu",
    generate=_cuda_generate,
    options=_cuda_options,
    built_with=_cuda_built_with,
    build=lambda source, library, options: toolchain.compile_cuda_library(
        source, library, options["archs"]
    ),
    # nvcc takes seconds a kernel: build a graph's kernels side by side.
    parallel_builds=4,
)

BACKENDS: dict[str, Backend] = {b.name: b for b in (CPU, CUDA)}


def backend_named(name: str, what: str) -> Backend:
    """The Backend called `name`; NotImplementedError naming `what` and the choices."""
    found = BACKENDS.get(name) if isinstance(name, str) else None
    if found is None:
        choices = ", ".join(repr(n) for n in BACKENDS)
        raise NotImplementedError(
            f"{what}: backend {name!r} is not supported (available: {choices})"
        )
    return found

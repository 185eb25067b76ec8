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
from mirage_jax.runtime import toolchain


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


def _cpu_generate(block_graph: Any, options: dict[str, Any]) -> tuple[str, str]:
    symbol = _core.cpu_kernel_symbol(block_graph)
    return symbol, _core.generate_cpu_kernel(block_graph, symbol)


def _cuda_options() -> dict[str, Any]:
    archs = toolchain.target_archs()
    # Shared memory is planned for the smallest limit of the target architectures.
    return {"archs": archs, "shared_memory": toolchain.shared_memory_limit(archs)}


def _cuda_generate(block_graph: Any, options: dict[str, Any]) -> tuple[str, str]:
    symbol = _core.cuda_kernel_symbol(block_graph)
    return symbol, _core.generate_cuda_kernel(block_graph, symbol, options["shared_memory"])


CPU = Backend(
    name="cpu",
    platform="cpu",
    cache_kind="kernel",
    cache_directory="kernels",
    source_name="kernel.cc",
    generate=_cpu_generate,
    options=dict,
    built_with=lambda options: {"compiler": toolchain.GXX, "flags": list(toolchain.GXX_FLAGS)},
    build=lambda source, library, options: toolchain.compile_cpu_library(source, library),
)

CUDA = Backend(
    name="cuda",
    platform="CUDA",
    cache_kind="cuda_kernel",
    cache_directory="cuda_kernels",
    source_name="kernel.cu",
    generate=_cuda_generate,
    options=_cuda_options,
    built_with=lambda options: {
        "compiler": toolchain.NVCC,
        "flags": list(toolchain.NVCC_FLAGS),
        "archs": list(options["archs"]),
    },
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

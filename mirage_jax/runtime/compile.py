"""generate_code and compile: a KernelGraph's customized ops as generated kernels, the rest
as lax ops (mirage_jax/runtime/lower.py). The target is a Backend record
(mirage_jax/runtime/backends.py)."""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from mirage_jax.ir.graph import KernelGraph
from mirage_jax.runtime import ffi_targets, kernel_cache
from mirage_jax.runtime.backends import Backend, backend_named
from mirage_jax.runtime.lower import lower_kernel_graph


@dataclass(frozen=True)
class CompiledGraph:
    """A KernelGraph made callable: `fn` as `compile` returns it, and `source`, the
    generated code of its kernels ("" when it has none)."""

    fn: Callable[..., tuple[jax.Array, ...]]
    source: str


def _check_graph(kg: object, what: str) -> KernelGraph:
    if not isinstance(kg, KernelGraph):
        raise TypeError(f"{what}: expected a mirage_jax KernelGraph, got {type(kg).__name__}")
    return kg


def _kernels(
    kg: KernelGraph, target: Backend, options: dict[str, Any]
) -> dict[int, tuple[str, str]]:
    """op index -> (handler symbol, source) for every customized op of kg."""
    kernels = {}
    for op in kg.ops:
        block_graph = op.block_graph  # None unless the op is a customized one
        if block_graph is not None:
            kernels[op.index] = target.generate(block_graph._core, options)
    return kernels


def _source(kernels: dict[int, tuple[str, str]]) -> str:
    units = dict(kernels.values())  # equal block graphs share a symbol: each kernel once
    return "\n".join(units.values())


def generate_code(kg: KernelGraph, backend: str = "cpu") -> str:
    """The generated source of every customized op of `kg`, as one translation unit (each
    kernel once, in op order; empty when kg has no customized op)."""
    _check_graph(kg, "generate_code")
    target = backend_named(backend, "generate_code")
    return _source(_kernels(kg, target, target.options()))


Generated = dict[int, tuple[str, str]]  # op index -> (handler symbol, source)


def build(
    kg: KernelGraph, backend: str = "cpu", what: str = "compile", generated: Generated | None = None
) -> CompiledGraph:
    """`compile`'s function together with the source it compiled (generated once: `generated`
    is prebuild's code for this graph, when it ran)."""
    _check_graph(kg, what)
    target = backend_named(backend, what)
    options = target.options()
    kernels = generated if generated is not None else _kernels(kg, target, options)

    def library(kernel: tuple[str, str]) -> Path:
        symbol, source = kernel
        return kernel_cache.library_for(source, target, options, symbol=symbol)

    workers = max(1, min(len(kernels), target.parallel_builds))
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            built = pool.map(in_callers_context(library), kernels.values())
            libraries = dict(zip(kernels, built))
    else:
        libraries = {index: library(kernel) for index, kernel in kernels.items()}
    targets = {
        index: ffi_targets.register_target(symbol, libraries[index], target.platform)
        for index, (symbol, _) in kernels.items()
    }
    result_dtypes = {op.index: [t.dtype for t in op.outputs] for op in kg.ops}

    def lower_customized(index: int, args: Any, result_shapes: Any) -> Any:
        target = targets[index]
        result_types = [
            jax.ShapeDtypeStruct(shape, dtype)
            for shape, dtype in zip(result_shapes, result_dtypes[index])
        ]
        call = jax.ffi.ffi_call(target.name, result_types, vmap_method="sequential")
        return call(*args, **target.attributes)

    return CompiledGraph(lower_kernel_graph(kg, lower_customized), _source(kernels))


def prebuild(graphs: list[KernelGraph], backend: str = "cpu") -> dict[str, Generated]:
    """Compiles the kernel libraries of several graphs at once, one compiler per core, into
    the kernel cache, so that building them one by one afterwards (with the code returned
    here, by graph hash) finds them there. Errors are left for that build to report (the
    same error, with its candidate's name)."""
    target = backend_named(backend, "prebuild")
    options = target.options()
    generated = {kg.hash(): _kernels(kg, target, options) for kg in graphs}
    sources: dict[str, str] = {}  # source -> its symbol; shared kernels once
    for kernels in generated.values():
        for symbol, source in kernels.values():
            sources.setdefault(source, symbol)

    def library(item: tuple[str, str]) -> None:
        source, symbol = item
        # An error is reported by the build of the candidate that needs it.
        with contextlib.suppress(Exception):
            kernel_cache.library_for(source, target, options, symbol=symbol)

    workers = max(1, min(len(sources), build_slots()))
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(in_callers_context(library), sources.items()))
    return generated


def in_callers_context(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`fn` for a pool's threads, each call run in a copy of the caller's context: the cache
    root a caller chose (store.using_cache_root, a context variable) is not seen by a thread
    the pool started, which would build into the default cache root instead."""
    context = contextvars.copy_context()
    return lambda item: context.copy().run(fn, item)


def jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """jax.jit of a compiled graph's function, its layout arguments static (lower.py)."""
    return jax.jit(fn, static_argnames=("out_shapes", "reshaped_inputs"))


def build_slots() -> int:
    """How many kernel libraries prebuild compiles at once: one compiler per usable core."""
    return max(1, len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else 1


def compile(kg: KernelGraph, backend: str = "cpu") -> Callable[..., tuple[jax.Array, ...]]:
    """A function of jax arrays, one per input of `kg` in order, returning a tuple with one
    array per output. Usable eagerly or inside jax.jit: predefined ops run as lax ops and each
    customized op is one XLA FFI custom call to its generated, compiled kernel. Kernels are
    compiled here (or found in the cache, mirage_jax/runtime/kernel_cache.py), not when it is
    called."""
    return build(kg, backend, "compile").fn

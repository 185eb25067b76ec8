"""Kernel runtime: compiling generated sources (g++ for CPU kernels, nvcc for CUDA kernels),
the on-disk library cache, and XLA FFI registration of the compiled handlers."""

from mirage_jax.runtime.cache import cache_root, library_key, shared_library_for
from mirage_jax.runtime.compiler import KernelCompileError
from mirage_jax.runtime.cuda_cache import cuda_library_for
from mirage_jax.runtime.ffi_targets import (
    KernelLoadError,
    register_cpu_target,
    register_cuda_target,
)

__all__ = [
    "KernelCompileError",
    "KernelLoadError",
    "cache_root",
    "cuda_library_for",
    "library_key",
    "register_cpu_target",
    "register_cuda_target",
    "shared_library_for",
]

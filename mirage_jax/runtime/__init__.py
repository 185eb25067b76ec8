"""Kernel runtime: compiling generated sources (g++), the on-disk library cache, and XLA
FFI registration of the compiled handlers."""

from mirage_jax.runtime.cache import cache_root, library_key, shared_library_for
from mirage_jax.runtime.compiler import KernelCompileError
from mirage_jax.runtime.ffi_targets import register_cpu_target

__all__ = [
    "KernelCompileError",
    "cache_root",
    "library_key",
    "register_cpu_target",
    "shared_library_for",
]

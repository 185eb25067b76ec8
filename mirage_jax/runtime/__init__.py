"""Making a KernelGraph callable from XLA: each customized op's generated kernel compiled
(toolchain.py) for a Backend (backends.py), cached on disk (kernel_cache.py) and made
callable from XLA (ffi_targets.py: a CUDA kernel as its own FFI target, a CPU kernel
through the extension's one handler); the predefined ops lowered to lax (lower.py); compile.py
puts these together. Timing functions against each other is profile.py. It knows no search.
"""

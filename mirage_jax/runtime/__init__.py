"""Making a KernelGraph callable from XLA: each customized op's generated kernel compiled
(toolchain.py) for a Backend (backends.py), cached on disk (kernel_cache.py) and registered as
an XLA FFI target (ffi_targets.py); the predefined ops lowered to lax (lower.py); compile.py
puts these together. Timing functions against each other is profile.py. It knows no search.
"""

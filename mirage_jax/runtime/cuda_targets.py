"""Registering compiled CUDA kernel handlers as XLA FFI targets on platform "CUDA".

Like ffi_targets.py: a target is named by its handler symbol (a content hash), registered once
per process, and its library handle is kept for the life of the process, since XLA holds raw
pointers into it.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()


def register_cuda_target(symbol: str, library: Path) -> str:
    """Makes `symbol` of `library` callable as the CUDA FFI target `symbol`; returns the
    target name. Idempotent within a process."""
    import jax

    with _lock:
        if symbol in _loaded:
            return symbol
        handle = ctypes.CDLL(str(library))
        try:
            function = getattr(handle, symbol)
        except AttributeError:
            raise RuntimeError(
                f"CUDA kernel library {library} does not export the FFI handler '{symbol}'"
            ) from None
        jax.ffi.register_ffi_target(symbol, jax.ffi.pycapsule(function), platform="CUDA")
        _loaded[symbol] = handle
    return symbol

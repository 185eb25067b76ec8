"""Loading compiled kernel libraries and registering their handlers as XLA FFI targets.

XLA refuses a second registration of a name with a different function pointer, so a target
is named by its handler symbol (a content hash) and registered once per process; the
library handle is kept here for the life of the process, since XLA holds raw pointers into
it. CPU handlers register on platform "cpu", CUDA ones on "CUDA".

A library is loaded here only once it has passed the probe (mirage_jax/runtime/
library_probe.py: loaded by a separate process first, its handler found there), so a crashing
or truncated library fails that process and not this one.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import jax

from mirage_jax.runtime.library_probe import KernelLoadError, ensure_probed

# symbol -> the loaded library that holds it
_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()


def register_target(symbol: str, library: Path, platform: str) -> str:
    """Makes `symbol` of `library` callable as the FFI target `symbol` on `platform`;
    returns the target name. Idempotent within a process. KernelLoadError, with nothing
    loaded, when the library fails its probe."""
    with _lock:
        if symbol in _loaded:
            return symbol
        problem = ensure_probed(library, symbol)
        if problem is not None:
            raise KernelLoadError(f"kernel library {library} was not loaded: {problem}")
        handle = ctypes.CDLL(str(library))
        try:
            function = getattr(handle, symbol)
        except AttributeError:  # the probe found it: the file changed since
            raise KernelLoadError(
                f"kernel library {library} does not export the FFI handler '{symbol}'"
            ) from None
        jax.ffi.register_ffi_target(symbol, jax.ffi.pycapsule(function), platform=platform)
        _loaded[symbol] = handle
    return symbol


def is_registered(symbol: str) -> bool:
    return symbol in _loaded

"""Loading compiled kernel libraries and registering their handlers as XLA FFI targets.

XLA refuses a second registration of a name with a different function pointer, so a target
is named by its handler symbol (a content hash) and registered once per process; the
library handle is kept here for the life of the process, since XLA holds raw pointers into
it. CPU handlers register on platform "cpu", CUDA ones on "CUDA".
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

# symbol -> the loaded library that holds it
_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()


def register_target(symbol: str, library: Path, platform: str) -> str:
    """Makes `symbol` of `library` callable as the FFI target `symbol` on `platform`;
    returns the target name. Idempotent within a process."""
    import jax

    with _lock:
        if symbol in _loaded:
            return symbol
        handle = ctypes.CDLL(str(library))
        try:
            function = getattr(handle, symbol)
        except AttributeError:
            raise RuntimeError(
                f"kernel library {library} does not export the FFI handler '{symbol}'"
            ) from None
        jax.ffi.register_ffi_target(symbol, jax.ffi.pycapsule(function), platform=platform)
        _loaded[symbol] = handle
    return symbol


def register_cpu_target(symbol: str, library: Path) -> str:
    return register_target(symbol, library, "cpu")


class KernelLoadError(RuntimeError):
    """A compiled CUDA kernel cannot run on a GPU of this machine (no loadable image, too
    little shared memory, a driver older than the toolkit that built it)."""


def check_cuda_kernel(symbol: str, library: Path, devices=None) -> None:
    """Asks the library's `<symbol>_check` whether the kernel can run on each of `devices`
    (jax GPU devices; default: every visible one), which also grants it its shared memory
    there: KernelLoadError with the reason when it cannot."""
    import ctypes

    import jax

    if devices is None:
        try:
            devices = jax.devices("gpu")
        except RuntimeError:
            return  # nothing to run on: the call itself will say so
    with _lock:
        handle = _loaded.get(symbol) or ctypes.CDLL(str(library))
    check = getattr(handle, symbol + "_check", None)
    if check is None:
        raise KernelLoadError(f"kernel library {library} has no load check '{symbol}_check' "
                              f"(built by an older mirage_jax: clear the kernel cache)")
    check.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    check.restype = ctypes.c_int
    for device in devices:
        ordinal = getattr(device, "local_hardware_id", None)
        ordinal = device.id if ordinal is None else ordinal
        message = ctypes.create_string_buffer(1024)
        if check(int(ordinal), message, len(message)) != 0:
            raise KernelLoadError(f"CUDA kernel {symbol} cannot run on {device}: "
                                  f"{message.value.decode(errors='replace')}")


def register_cuda_target(symbol: str, library: Path) -> str:
    """Registers the CUDA handler after checking, once per process, that it can run on every
    visible GPU (check_cuda_kernel)."""
    if not is_registered(symbol):
        check_cuda_kernel(symbol, library)
    return register_target(symbol, library, "CUDA")


def is_registered(symbol: str) -> bool:
    return symbol in _loaded

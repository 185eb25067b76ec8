"""Loading compiled kernel libraries and making their kernels callable from XLA.

A CUDA library exports an XLA FFI handler: it is registered as the target named by its
symbol (a content hash; XLA refuses a second registration of a name with a different
function pointer), on platform "CUDA", once its load check (check_cuda_kernel) has passed
on every visible GPU. A CPU library exports plain C functions instead (an entry and its
signature): they are registered with the extension's one CPU handler (the target
"mirage_jax_cpu", cc/python/cpu_dispatch.cc), and a call names its kernel in the attribute
`kernel`. Either way a kernel registers once per process, and its library handle is kept
here for the life of the process, since XLA holds raw pointers into it.

A library is loaded here only once it has passed the probe (mirage_jax/runtime/
library_probe.py: loaded by a separate process first, its handler found there), so a crashing
or truncated library fails that process and not this one.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax

from mirage_jax import _core
from mirage_jax.runtime.library_probe import KernelLoadError, ensure_probed

CPU_TARGET = "mirage_jax_cpu"

# symbol -> the loaded library that holds it
_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()
_cpu_target_registered = False


@dataclass(frozen=True)
class Target:
    """How XLA calls a kernel: jax.ffi.ffi_call(name, ...)(*args, **attributes)."""

    name: str
    attributes: dict[str, str] = field(default_factory=dict)


def register_target(symbol: str, library: Path, platform: str) -> Target:
    """Makes kernel `symbol` of `library` callable from XLA on `platform`. Idempotent within
    a process. KernelLoadError, with nothing loaded, when the library fails its probe."""
    with _lock:
        if symbol not in _loaded:
            _load(symbol, library, platform)
    if platform == "cpu":
        return Target(CPU_TARGET, {"kernel": symbol})
    return Target(symbol)


def _load(symbol: str, library: Path, platform: str) -> None:
    global _cpu_target_registered
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
    if platform == "CUDA":
        check_cuda_kernel(symbol, library, handle=handle)
        jax.ffi.register_ffi_target(symbol, jax.ffi.pycapsule(function), platform=platform)
    else:
        signature = getattr(handle, symbol + "_signature", None)
        if signature is None:
            raise KernelLoadError(
                f"kernel library {library} has no signature '{symbol}_signature' "
                f"(built by an older mirage_jax: clear the kernel cache)"
            )
        entry = ctypes.cast(function, ctypes.c_void_p).value
        describe = ctypes.cast(signature, ctypes.c_void_p).value
        if not entry or not describe:  # a symbol at address 0: nothing to call
            raise KernelLoadError(f"kernel library {library} exports '{symbol}' at address 0")
        try:
            _core.register_cpu_kernel(symbol, entry, describe)
        except ValueError as e:
            raise KernelLoadError(str(e)) from None
        if not _cpu_target_registered:
            jax.ffi.register_ffi_target(CPU_TARGET, _core.cpu_dispatch_handler(), platform="cpu")
            _cpu_target_registered = True
    _loaded[symbol] = handle


def is_registered(symbol: str) -> bool:
    return symbol in _loaded


def check_cuda_kernel(
    symbol: str,
    library: Path,
    devices: Sequence[Any] | None = None,
    handle: ctypes.CDLL | None = None,
) -> None:
    """Asks the library's `<symbol>_check` whether the kernel can run on each of `devices`
    (jax GPU devices; default: every visible one), which also grants it its shared memory
    there: KernelLoadError (a compiled CUDA kernel cannot run on a GPU of this machine: no
    loadable image, too little shared memory, a driver older than the toolkit that built it)
    with the reason when it cannot. `handle`: the library, when already loaded."""
    if devices is None:
        try:
            devices = jax.devices("gpu")
        except RuntimeError:
            return  # nothing to run on: the call itself will say so
    if handle is None:
        handle = _loaded.get(symbol) or ctypes.CDLL(str(library))
    check = getattr(handle, symbol + "_check", None)
    if check is None:
        raise KernelLoadError(
            f"kernel library {library} has no load check '{symbol}_check' "
            f"(built by an older mirage_jax: clear the kernel cache)"
        )
    check.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    check.restype = ctypes.c_int
    for device in devices:
        ordinal = getattr(device, "local_hardware_id", None)
        ordinal = device.id if ordinal is None else ordinal
        message = ctypes.create_string_buffer(1024)
        if check(int(ordinal), message, len(message)) != 0:
            raise KernelLoadError(
                f"CUDA kernel {symbol} cannot run on {device}: "
                f"{message.value.decode(errors='replace')}"
            )

"""Probing a kernel library in a separate process before this one loads it.

Loading a shared library runs its constructors and maps its segments: a truncated library
dies of SIGBUS inside dlopen, a crafted one runs whatever its constructors do. Neither can be
caught once it happens in the user's process, so a library is first loaded by a short-lived
child (a bare Python: no site packages, no jax; ctypes only, the same loader call as
ffi_targets.py) which also looks up the FFI handler. Only a library whose child exited
cleanly is loaded here.

The result is recorded next to the library (probe.json: the library's sha256 and the handler
found), so a library is probed once per change of its bytes, not once per process. The probe
proves the library loads and exports its handler; it does not prove what its code does: only
a signature on an imported archive (mirage_jax/cache/signing.py) says who built it.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

from mirage_jax.cache import store


class KernelLoadError(RuntimeError):
    """A kernel library does not load, or does not export its handler."""


# A slow constructor or a hang in the loader must not block a program forever; loading a
# sound library takes milliseconds.
PROBE_TIMEOUT_S = 60.0

_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NO_LOAD, _NO_SYMBOL = 3, 4
# The child: -I -S keeps out the environment, the user's site packages and the current
# directory, so it imports nothing but ctypes.
_CHILD = f"""
import ctypes, sys
try:
    library = ctypes.CDLL(sys.argv[1])
except OSError as e:
    sys.stderr.write(f"it does not load ({{e}})")
    sys.exit({_NO_LOAD})
if not hasattr(library, sys.argv[2]):
    sys.stderr.write(f"it does not export the FFI handler {{sys.argv[2]!r}}")
    sys.exit({_NO_SYMBOL})
"""


def probe(library: Path, symbol: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Loads `library` in a child process and looks up `symbol` there: None when both
    worked, else what went wrong (a crash, a missing handler, a hang)."""
    if not _SYMBOL.fullmatch(symbol):
        return f"its handler name {symbol!r} is not a C identifier"
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _CHILD, str(library), symbol],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"loading it did not finish within {timeout_s:g} s"
    if done.returncode == 0:
        return None
    if done.returncode in (_NO_LOAD, _NO_SYMBOL):
        return done.stderr.strip()[-500:]
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return f"loading it killed the process ({name})"
    return f"loading it ended the process with status {done.returncode}: {done.stderr[-500:]}"


def _record_of(library: Path) -> Path:
    return library.with_name(store.PROBE)


def recorded(library: Path, symbol: str, library_sha256: str) -> bool:
    """Whether a probe of exactly these bytes found `symbol`."""
    try:
        doc = json.loads(_record_of(library).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(doc, dict)
        and doc.get("library_sha256") == library_sha256
        and doc.get("symbol") == symbol
    )


def ensure_probed(
    library: Path, symbol: str, library_sha256: str | None = None, fresh: bool = False
) -> str | None:
    """None when `library` (whose sha256 is `library_sha256`, computed when not given) has
    passed the probe, from the record unless `fresh`; else what is wrong. A pass is
    recorded."""
    try:
        digest = store.sha256_of(library) if library_sha256 is None else library_sha256
    except OSError as e:
        return f"it is unreadable ({e})"
    if not fresh and recorded(library, symbol, digest):
        return None
    problem = probe(library, symbol)
    if problem is None:
        # In a read-only cache the library is probed again next time.
        with contextlib.suppress(OSError):
            store.write_json(_record_of(library), {"library_sha256": digest, "symbol": symbol})
    return problem

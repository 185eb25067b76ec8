"""The system headers every generated CPU kernel includes (the C++ standard library's and the
AVX-512 intrinsics'), precompiled once per machine and compiler, and the CPU kernels'
compile, which takes them from there.

Parsing those headers is most of a kernel's compile: g++ -ftime-report on a 1,200-line
generated kernel puts 83-89% of it in parsing, and with the headers precompiled the same
compile took 0.14-0.17 s against 0.55-0.67 s (g++ 12, 2026-12-08), the machine code
unchanged (objdump -d of both libraries is the same; benchmarks/kernel_compile.py times
both ways). A decorated model's first call is bounded by its budget, so there the gain is
smaller: a Llama decode step's cold call ran about 10% faster.

The header is passed with -include: g++ takes its .gch when the .gch was built with the same
compiler and flags, and reads the header's text otherwise, so a stale or foreign .gch costs
time, not correctness. The kernel's own #includes of the same headers then do nothing. A
compile that fails with the header and succeeds without it (a damaged .gch) discards the
header, and this process compiles without one from then on.

It lives under store.machine_root(), not under a cache_dir a function was given: it is the
machine's, not the function's, and about 50 MB, which every cache root would build again.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import threading
from pathlib import Path

from absl import logging

from mirage_jax import _core
from mirage_jax.cache import store
from mirage_jax.runtime import toolchain
from mirage_jax.runtime.toolchain import KernelCompileError

DIRECTORY = "precompiled_headers"
HEADER = "kernel_includes.h"
store.MACHINE_DIRECTORIES.add(DIRECTORY)

# (machine root, key) -> the header, or None where it could not be built; one try a process.
_built: dict[tuple[Path, str], Path | None] = {}
_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _compiler_identity() -> str:
    """The compiler as its output depends on it: its path and its version line."""
    path = toolchain.find_gxx()
    try:
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=60
        ).stdout.splitlines()[:1]
    except (OSError, subprocess.SubprocessError):
        version = []
    return "\n".join([path, *version])


def key() -> str:
    """The entry's name: the headers' text, the compiler, its flags and the CPU's features
    (-march=native), so two compilers or machines sharing a cache root keep one each."""
    h = hashlib.sha256()
    for part in (
        _core.cpu_kernel_includes(),
        _compiler_identity(),
        *toolchain.GXX_FLAGS,
        toolchain.native_isa(),
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _sound(entry: Path) -> bool:
    header, gch = entry / HEADER, entry / f"{HEADER}.gch"
    return (
        header.is_file()
        and header.read_text() == _core.cpu_kernel_includes()
        and gch.is_file()
        and gch.stat().st_size > 0
    )


def _build(parent: Path, name: str) -> Path:
    """The header of parent/name, built (under the key's lock, across processes) unless a
    sound one is there."""
    entry = parent / name
    with store.locked(parent / ".locks" / f"{name}.lock"):
        if not _sound(entry):
            logging.info("mirage_jax: precompiling the CPU kernels' headers (once; in %s)", parent)
            store.remove_entry(entry)
            with store.staged_entry(parent, name) as staging:
                header = staging / HEADER
                header.write_text(_core.cpu_kernel_includes())
                toolchain.compile_cpu_header(header, staging / f"{HEADER}.gch")
    return entry / HEADER


def root() -> Path:
    """The cache root the header is kept under: the machine's (store.machine_root)."""
    return store.machine_root()


def build_in(cache_root: Path) -> Path:
    """The header under `cache_root`, built there unless a sound one is: KernelCompileError
    or OSError when it cannot be."""
    return _build(cache_root / DIRECTORY, key())


def header() -> Path | None:
    """This machine's precompiled kernel header, built on first use; None where it cannot be
    (an unwritable cache, a compiler that refuses it): kernels then compile without."""
    where, name = root(), key()
    with _lock:
        if (where, name) not in _built:
            try:
                _built[where, name] = build_in(where)
            except (OSError, KernelCompileError) as e:
                logging.info("mirage_jax: CPU kernels compile without a precompiled header: %s", e)
                _built[where, name] = None
        return _built[where, name]


def _discard(found: Path) -> None:
    with _lock:
        for place, built in _built.items():
            if built == found:
                _built[place] = None
    shutil.rmtree(found.parent, ignore_errors=True)


def compile_cpu_library(source: Path, library: Path) -> None:
    """toolchain.compile_cpu_library with this machine's precompiled header."""
    found = header()
    if found is None:
        toolchain.compile_cpu_library(source, library)
        return
    try:
        toolchain.compile_cpu_library(source, library, include=found)
    except KernelCompileError:
        # The kernel's own error is the one without the header; if there is none, the header
        # was at fault.
        toolchain.compile_cpu_library(source, library)
        logging.warning(
            "mirage_jax: a CPU kernel failed to compile with the precompiled header %s and "
            "compiled without it; the header is discarded",
            found,
        )
        _discard(found)

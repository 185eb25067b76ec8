"""Compiling generated C++ kernels into shared libraries with g++ (DESIGN.md §6)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

COMPILER = "g++"

# The XLA FFI headers come in with -isystem (added by compile_shared_library), which also
# keeps their own warnings out of our output. -fvisibility=hidden exports only the handler,
# which the generated code declares with default visibility.
FLAGS = ("-O3", "-march=native", "-shared", "-fPIC", "-std=c++17", "-fvisibility=hidden")

# Generous: a generated kernel compiles in seconds; a hang must not block a program forever.
_TIMEOUT_S = 600


class KernelCompileError(RuntimeError):
    """The C++ compiler is missing or rejected a generated kernel."""


def find_compiler() -> str:
    """The path of g++, or KernelCompileError naming what is missing."""
    path = shutil.which(COMPILER)
    if path is None:
        raise KernelCompileError(
            f"{COMPILER} was not found on PATH; mirage_jax compiles its CPU kernels with "
            f"{COMPILER} (install it, e.g. `apt-get install g++`, or add it to PATH)"
        )
    return path


def ffi_include_dir() -> str:
    import jax.ffi

    return jax.ffi.include_dir()


def compile_shared_library(source: Path, library: Path) -> None:
    """g++ `source` into the shared library `library`; KernelCompileError with the
    compiler's diagnostics when it fails."""
    command = [find_compiler(), *FLAGS, "-isystem", ffi_include_dir(), str(source),
               "-o", str(library)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KernelCompileError(
            f"{COMPILER} did not finish compiling {source} within {_TIMEOUT_S} s"
        ) from None
    if done.returncode != 0:
        raise KernelCompileError(
            f"{COMPILER} failed (exit {done.returncode}) compiling {source}:\n"
            f"{done.stderr[-4000:]}"
        )

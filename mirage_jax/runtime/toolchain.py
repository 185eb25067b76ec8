"""The compilers that turn generated kernels into shared libraries: g++ for CPU kernels, nvcc
for CUDA kernels, both run by one runner (`run`: a timeout, and a KernelCompileError with
the compiler's diagnostics when it fails).

CUDA architectures come from $MIRAGE_JAX_CUDA_ARCH ("80,90a"), else from the visible GPUs,
else sm_80 and sm_90a. Every architecture gets its own SASS in one fat library, and the
kernels' shared memory is planned for the smallest per-block limit among them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.ffi

from mirage_jax import _core


class KernelCompileError(RuntimeError):
    """A compiler is missing or rejected a generated kernel."""


# Generous: a generated kernel compiles in seconds; a hang must not block a program forever.
TIMEOUT_S = 600


def run(compiler: str, command: list[str], what: str) -> None:
    """Runs `command` (the compiler `compiler` on `what`); KernelCompileError with the
    compiler's diagnostics when it fails or does not finish within TIMEOUT_S."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise KernelCompileError(
            f"{compiler} did not finish compiling {what} within {TIMEOUT_S} s"
        ) from None
    if done.returncode != 0:
        raise KernelCompileError(
            f"{compiler} failed (exit {done.returncode}) compiling {what}:\n"
            f"{(done.stderr + done.stdout)[-4000:]}"
        )


def ffi_include_dir() -> str:
    return jax.ffi.include_dir()


# -- g++: CPU kernels ----------------------------------------------------------------------

GXX = "g++"
# The XLA FFI headers come in with -isystem, which also keeps their own warnings out of our
# output. -fvisibility=hidden exports only the handler, which the generated code declares
# with default visibility.
GXX_FLAGS = ("-O3", "-march=native", "-shared", "-fPIC", "-std=c++17", "-fvisibility=hidden")


def find_gxx() -> str:
    """The path of g++, or KernelCompileError naming what is missing."""
    path = shutil.which(GXX)
    if path is None:
        raise KernelCompileError(
            f"{GXX} was not found on PATH; mirage_jax compiles its CPU kernels with "
            f"{GXX} (install it, e.g. `apt-get install g++`, or add it to PATH)"
        )
    return path


def compile_cpu_library(source: Path, library: Path) -> None:
    """g++ `source` into the shared library `library`; KernelCompileError with the
    compiler's diagnostics when it fails."""
    command = [
        find_gxx(),
        *GXX_FLAGS,
        "-isystem",
        ffi_include_dir(),
        str(source),
        "-o",
        str(library),
    ]
    run(GXX, command, str(source))


# -- nvcc: CUDA kernels --------------------------------------------------------------------

NVCC = "nvcc"
ARCH_ENV = "MIRAGE_JAX_CUDA_ARCH"
DEFAULT_ARCHS = ("80", "90a")
# -fvisibility=hidden exports only the handler, which the generated code declares with
# default visibility. No fast-math: the kernels must keep the interpreter's IEEE division,
# square root and expf.
NVCC_FLAGS = ("-O3", "-std=c++17", "-Xcompiler", "-fPIC,-fvisibility=hidden")
# Where CUDA toolkits install when their bin directory is not on PATH.
FALLBACK_ROOTS: tuple[str, ...] = ("/usr/local/cuda",)

_ARCH = re.compile(r"^[0-9]{2,3}[af]?$")


def find_nvcc() -> str:
    """The path of nvcc (PATH, then $CUDA_HOME/bin, then /usr/local/cuda/bin), or
    KernelCompileError naming what is missing."""
    path = shutil.which(NVCC)
    if path is None:
        for root in (os.environ.get("CUDA_HOME"), *FALLBACK_ROOTS):
            candidate = Path(root or "") / "bin" / NVCC
            if root and candidate.is_file():
                return str(candidate)
        raise KernelCompileError(
            f"{NVCC} was not found on PATH, in $CUDA_HOME/bin or in /usr/local/cuda/bin; "
            f"mirage_jax compiles its CUDA kernels with {NVCC} (install the CUDA toolkit "
            f"or add its bin directory to PATH)"
        )
    return path


def parse_archs(text: str) -> tuple[str, ...]:
    """ "80,90a" -> ("80", "90a"); KernelCompileError for anything that is not a list of
    compute capabilities."""
    archs = tuple(a.strip().removeprefix("sm_") for a in text.split(",") if a.strip())
    bad = [a for a in archs if not _ARCH.match(a)]
    if not archs or bad:
        raise KernelCompileError(
            f"{ARCH_ENV}={text!r} is not a comma-separated list of CUDA architectures such as "
            f"'80,90a' (bad: {', '.join(bad) or 'empty'})"
        )
    return archs


def _visible_gpu_archs() -> tuple[str, ...]:
    try:
        devices = jax.devices("gpu")
    except Exception:
        return ()
    archs: list[str] = []
    for d in devices:
        major, _, minor = str(getattr(d, "compute_capability", "")).partition(".")
        if not major.isdigit():
            continue
        arch = f"{major}{minor or '0'}"
        # sm_90a's SASS runs on exactly 9.0 devices and allows Hopper-only instructions.
        arch = "90a" if arch == "90" else arch
        if arch not in archs:
            archs.append(arch)
    return tuple(archs)


def target_archs() -> tuple[str, ...]:
    configured = os.environ.get(ARCH_ENV)
    if configured is not None:
        return parse_archs(configured)
    return _visible_gpu_archs() or DEFAULT_ARCHS


def shared_memory_limit(archs: Sequence[str]) -> int:
    """Bytes of dynamic shared memory a block may use on every one of `archs`."""
    return min(_core.cuda_shared_memory_limit(a) for a in archs)


def gencode_flags(archs: Sequence[str]) -> list[str]:
    flags = []
    for a in archs:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    return flags


def _nvcc_command(archs: Sequence[str]) -> list[str]:
    return [find_nvcc(), *NVCC_FLAGS, *gencode_flags(archs), "-isystem", ffi_include_dir()]


def compile_cuda_library(source: Path, library: Path, archs: Sequence[str]) -> None:
    """nvcc `source` into the shared library `library` for `archs`; KernelCompileError with
    the compiler's diagnostics when it fails."""
    # --threads 2: the architectures' device passes run side by side (output unchanged).
    run(
        NVCC,
        [*_nvcc_command(archs), "--threads", "2", "-shared", str(source), "-o", str(library)],
        str(source),
    )


def check_cuda_compiles(sources: Sequence[str], archs: Sequence[str], jobs: int = 2) -> None:
    """Compiles each source text to an object file (nvcc -c, every architecture in one call),
    at most `jobs` at a time, and discards the objects: KernelCompileError naming the first
    source that fails. For checking generated code on machines without a GPU."""
    with tempfile.TemporaryDirectory(prefix="mj_nvcc_") as tmp:

        def one(i: int) -> None:
            path = Path(tmp) / f"unit{i}.cu"
            path.write_text(sources[i])
            run(
                NVCC,
                [*_nvcc_command(archs), "-c", str(path), "-o", str(path.with_suffix(".o"))],
                f"{path.name} (source {i} of {len(sources)})",
            )

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for future in [pool.submit(one, i) for i in range(len(sources))]:
                future.result()

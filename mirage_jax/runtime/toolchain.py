"""The compilers that turn generated kernels into shared libraries: g++ for CPU kernels, nvcc
for CUDA kernels, both run by one runner (`run`: a timeout, and a KernelCompileError with
the compiler's diagnostics when it fails).

CUDA architectures come from $MIRAGE_JAX_CUDA_ARCH ("80,90a"), else from the visible GPUs,
else sm_80 and sm_90a; sm_80 is the oldest the kernels support. Every architecture gets its
own SASS in one fat library, plus PTX of the oldest one, which the driver compiles for a
newer GPU family that has no SASS in it. The kernels' shared memory is planned for the
smallest per-block limit among the architectures and the GPUs visible here (queried from the
driver), so a library built for sm_90 still fits the sm_89 or sm_120 it may meet.

The runtime is linked statically, so a library needs a driver at least as new as the
toolkit's major version: the toolkit's version is part of the cache key, and the kernel
checks the driver when it is loaded (mirage_jax.runtime.ffi_targets).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
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
# A CPU kernel includes only the C++ standard library (its XLA FFI handler is the
# extension's). -fvisibility=hidden exports only its entry and signature, which the
# generated code declares with default visibility. -fno-math-errno lets GCC vectorize
# std::sqrt (with errno to set, it calls libm one element at a time); no kernel reads errno,
# and the results are the same (a negative operand gives NaN either way).
GXX_FLAGS = (
    "-O3",
    "-march=native",
    "-fno-math-errno",
    "-shared",
    "-fPIC",
    "-std=c++17",
    "-fvisibility=hidden",
)


# g++ flags for a program (a probe, a benchmark) built as the kernels are, not as a library.
GXX_PROGRAM_FLAGS = tuple(
    f for f in GXX_FLAGS if f not in ("-shared", "-fPIC", "-fvisibility=hidden")
)


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The instruction sets this CPU reports (/proc/cpuinfo's flags: avx512f, amx_bf16, ...),
    which -march=native compiles for; empty where they cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.lower().startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def native_isa() -> str:
    """A digest of cpu_flags(): a library built on one CPU may use instructions another lacks
    (AVX-512 on an AVX2 machine, the AMX tiles of cc/codegen/cpu/prelude.cc on an AMD one), so
    a kernel cache shared or exported across machines keys its libraries by it. "unknown"
    where the flags cannot be read."""
    flags = cpu_flags()
    if not flags:
        return "unknown"
    return hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16]


def find_gxx() -> str:
    """The path of g++, or KernelCompileError naming what is missing."""
    path = shutil.which(GXX)
    if path is None:
        raise KernelCompileError(
            f"{GXX} was not found on PATH; mirage_jax compiles its CPU kernels with "
            f"{GXX} (install it, e.g. `apt-get install g++`, or add it to PATH)"
        )
    return path


def compile_cpu_library(source: Path, library: Path, include: Path | None = None) -> None:
    """g++ `source` into the shared library `library`, with `include` (a header, precompiled
    beside it: mirage_jax/runtime/precompiled_header.py) read before it; KernelCompileError
    with the compiler's diagnostics when it fails."""
    command = [
        find_gxx(),
        *GXX_FLAGS,
        *(["-include", str(include)] if include is not None else []),
        str(source),
        "-o",
        str(library),
    ]
    run(GXX, command, str(source))


def compile_cpu_header(header: Path, precompiled: Path) -> None:
    """g++ `header` into `precompiled` (its .gch), with the kernels' flags: g++ uses a .gch
    only for compiles with the flags it was built with."""
    command = [find_gxx(), *GXX_FLAGS, "-x", "c++-header", str(header), "-o", str(precompiled)]
    run(GXX, command, str(header))


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

# cp.async, ldmatrix and bf16 mma.sync: the oldest architecture the kernels are written for.
MIN_ARCH = 80

# jax.default_matmul_precision values under which XLA itself runs float32 dots on TF32 tensor
# cores (or coarser) on sm_80 and later (None: jax's default); the kernels then may too.
# "highest", "float32", "high", "bfloat16_3x" ask for more than TF32 gives, and so does
# anything unknown here.
_TF32_PRECISIONS = (None, "default", "fastest", "bfloat16", "tensorfloat32")


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
    old = [a for a in archs if _arch_number(a) < MIN_ARCH]
    if old:
        raise KernelCompileError(
            f"{ARCH_ENV}={text!r}: mirage_jax's CUDA kernels need sm_{MIN_ARCH} or later "
            f"(cp.async, ldmatrix, bf16 tensor cores); not {', '.join('sm_' + a for a in old)}"
        )
    return archs


def _arch_number(arch: str) -> int:
    return int(arch.rstrip("af"))


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


def device_shared_memory_limits() -> tuple[int, ...]:
    """cudaDevAttrMaxSharedMemoryPerBlockOptin of every GPU the driver sees (empty without a
    driver or a GPU): the limit a kernel planned here must fit on the GPU that runs it."""
    return _driver_query()[1]


def driver_cuda_version() -> int | None:
    """The CUDA version the installed driver supports (e.g. 12080 for 12.8), or None."""
    return _driver_query()[0]


# H100's: what kernels are planned for (split-K) where no GPU is visible.
DEFAULT_SM_COUNT = 132
SMS_ENV = "MIRAGE_JAX_CUDA_SMS"


def sm_count() -> int:
    """The SMs kernels are planned to fill (split-K): $MIRAGE_JAX_CUDA_SMS, else the fewest of
    the visible GPUs', else H100's. A build machine shipping kernels to other GPUs sets it
    to theirs, so that both plan alike."""
    configured = os.environ.get(SMS_ENV)
    if configured is not None:
        if not configured.strip().isdigit() or int(configured) < 1:
            raise KernelCompileError(f"{SMS_ENV}={configured!r} is not a positive number of SMs")
        return int(configured)
    counts = _driver_query()[2]
    return min(counts) if counts else DEFAULT_SM_COUNT


_driver_cache: tuple[int | None, tuple[int, ...], tuple[int, ...]] | None = None


def _driver_query() -> tuple[int | None, tuple[int, ...], tuple[int, ...]]:
    """(driver CUDA version, per-GPU shared memory per block, per-GPU SMs)."""
    global _driver_cache
    if _driver_cache is None:
        _driver_cache = _query_driver()
    return _driver_cache


def _query_driver() -> tuple[int | None, tuple[int, ...], tuple[int, ...]]:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, (), ()
    version = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None, (), ()
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return version.value, (), ()
    limits, sms = [], []
    for ordinal in range(count.value):
        device, smem, units = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
            continue
        # CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, _MULTIPROCESSOR_COUNT
        if cuda.cuDeviceGetAttribute(ctypes.byref(smem), 97, device) == 0:
            limits.append(smem.value)
        if cuda.cuDeviceGetAttribute(ctypes.byref(units), 16, device) == 0:
            sms.append(units.value)
    return version.value, tuple(limits), tuple(sms)


def shared_memory_limit(archs: Sequence[str]) -> int:
    """Bytes of dynamic shared memory a block may use on every one of `archs` and on every
    GPU visible here."""
    return min(
        [_core.cuda_shared_memory_limit(a) for a in archs] + list(device_shared_memory_limits())
    )


def tf32_allowed() -> bool:
    """Whether float32 matmuls may run on TF32 tensor cores: jax.default_matmul_precision
    (the context manager or the config) leaves XLA's default (TF32 on sm_80 and later), or
    asks for TF32 or less."""
    # a context-manager flag: read as an attribute, which the config type does not declare
    precision = jax.config.jax_default_matmul_precision  # type: ignore[attr-defined]
    return (precision.lower() if isinstance(precision, str) else precision) in _TF32_PRECISIONS


def ptx_arch(archs: Sequence[str]) -> str:
    """The virtual architecture whose PTX the library embeds: the oldest target, without
    its a/f suffix (arch-specific PTX runs on that architecture only)."""
    return str(min(_arch_number(a) for a in archs))


def gencode_flags(archs: Sequence[str], with_ptx: bool = True) -> list[str]:
    """SASS for each architecture, and (with_ptx) PTX of ptx_arch(archs) for GPUs newer than
    all of them."""
    flags = []
    for a in archs:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    if with_ptx:
        p = ptx_arch(archs)
        flags += ["-gencode", f"arch=compute_{p},code=compute_{p}"]
    return flags


_toolkit: str | None = None


def toolkit_version() -> str:
    """nvcc's release and build, e.g. "13.0.88" (part of the cache key: a library built by
    another toolkit is another library)."""
    global _toolkit
    if _toolkit is None:
        try:
            done = subprocess.run(
                [find_nvcc(), "--version"], capture_output=True, text=True, timeout=60
            )
        except subprocess.TimeoutExpired:
            raise KernelCompileError(f"{NVCC} --version did not answer in 60 s") from None
        found = re.search(r"release [0-9.]+, V([0-9.]+)", done.stdout)
        if done.returncode != 0 or not found:
            raise KernelCompileError(
                f"cannot read {NVCC}'s version from {(done.stdout + done.stderr)[-500:]!r}"
            )
        _toolkit = found.group(1)
    return _toolkit


def minimum_driver(toolkit: str) -> int:
    """The oldest driver CUDA version (cuDriverGetVersion's encoding) that runs a library
    built by `toolkit` with its runtime linked statically: the toolkit's major version (CUDA
    minor-version compatibility)."""
    return int(toolkit.split(".")[0]) * 1000


def _nvcc_command(archs: Sequence[str], with_ptx: bool = True) -> list[str]:
    return [
        find_nvcc(),
        *NVCC_FLAGS,
        *gencode_flags(archs, with_ptx),
        "-isystem",
        ffi_include_dir(),
    ]


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
    """Compiles each source text to an object file (nvcc -c, every architecture in one call,
    no PTX), at most `jobs` at a time, and discards the objects: KernelCompileError naming
    the first source that fails. For checking generated code on machines without a GPU."""
    with tempfile.TemporaryDirectory(prefix="mj_nvcc_") as tmp:

        def one(i: int) -> None:
            path = Path(tmp) / f"unit{i}.cu"
            path.write_text(sources[i])
            run(
                NVCC,
                [
                    *_nvcc_command(archs, with_ptx=False),
                    "-c",
                    str(path),
                    "-o",
                    str(path.with_suffix(".o")),
                ],
                f"{path.name} (source {i} of {len(sources)})",
            )

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for future in [pool.submit(one, i) for i in range(len(sources))]:
                future.result()

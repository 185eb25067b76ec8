"""What a measurement depends on besides the program: the CPU, the C++ core, when and where.
Shared by the caches that keep measurements (verdicts, the calibration), without importing
them, so that the search can resolve its target without a circle of imports."""

from __future__ import annotations

import datetime
import functools
import hashlib
import platform
from pathlib import Path

from mirage_jax import _core
from mirage_jax.runtime import toolchain


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def vector_floats() -> int:
    """The float32 lanes of the generated CPU kernels' vectors: they compile for this machine
    (-march=native), 16 with AVX-512 and 8 otherwise (cc/codegen/cpu/prelude.cc)."""
    return 16 if "avx512f" in toolchain.cpu_flags() else 8


@functools.lru_cache(maxsize=1)
def core_digest() -> str:
    """The C++ core's sha256: search results and generated kernels depend on it."""
    return hashlib.sha256(Path(_core.__file__).read_bytes()).hexdigest()


# The Python modules whose code decides what a search returns, besides the C++ core: a new
# kind of candidate (a cut into parts, a lift) must not be answered from an entry an older
# search stored.
SEARCH_MODULES = ("search", "parts", "split", "cones", "lift", "deepening", "config")


def _sources_digest(modules: tuple[str, ...]) -> str:
    """The sha256 of these modules' sources (names in this package folder)."""
    digest = hashlib.sha256()
    for name in modules:
        digest.update((Path(__file__).parent / f"{name}.py").read_bytes())
    return digest.hexdigest()


@functools.cache
def search_code_digest() -> str:
    """The sha256 of the SEARCH_MODULES' sources."""
    return _sources_digest(SEARCH_MODULES)


@functools.cache
def calibration_code_digest() -> str:
    """The sha256 of calibration.py: its probes and how it derives each figure from them. A
    calibration stored by other probes (the split stream's once came from one row of x, a
    ratio the ranking moved with) is measured again."""
    return _sources_digest(("calibration",))


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def host() -> str:
    return platform.node() or "unknown host"

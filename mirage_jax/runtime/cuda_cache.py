"""The on-disk cache of compiled CUDA kernel libraries: the same layout, locking, staging and
checksums as the CPU cache (cache.py), in cache_root()/cuda_kernels, keyed also by nvcc's
flags, its version, the minimum driver it implies, and the target architectures.

A serving machine may have no nvcc (a cache exported from a build machine): it cannot know
the toolkit's version, so it finds entries by their source key (everything but the
toolkit, recorded in meta.json) and takes the one built by the newest toolkit whose minimum
driver this machine's driver meets. None there: KernelCompileError saying what to ship."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path

from mirage_jax.runtime import cache, cuda_compiler

_SOURCE = "kernel.cu"
_LIBRARY = "kernel.so"  # the name cache.entry_problem checks
_META = "meta.json"


def _hash(parts) -> str:
    import hashlib

    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def source_key(source: str, archs: Sequence[str]) -> str:
    """What an entry is for, whichever toolkit built it."""
    return _hash((source, cuda_compiler.COMPILER, *cuda_compiler.FLAGS,
                  *cuda_compiler.gencode_flags(archs),
                  *sorted(f"{k}={v}" for k, v in cache.versions().items())))


def library_key(source: str, archs: Sequence[str], toolkit: str | None = None) -> str:
    """The entry's key: its source key, the toolkit (default: this machine's nvcc) and the
    minimum driver that toolkit's statically linked runtime needs."""
    toolkit = toolkit or cuda_compiler.toolkit_version()
    return _hash((source_key(source, archs), f"toolkit={toolkit}",
                  f"min_driver={cuda_compiler.minimum_driver(toolkit)}"))


def _build_entry(kernels: Path, key: str, source: str, archs: Sequence[str]) -> None:
    with cache.staged_entry(kernels, key) as staging:
        toolkit = cuda_compiler.toolkit_version()
        (staging / _SOURCE).write_text(source)
        cuda_compiler.compile_shared_library(staging / _SOURCE, staging / _LIBRARY, archs)
        meta = {"kind": "cuda_kernel", "key": key, "sha256": cache.sha256_of(staging / _LIBRARY),
                "compiler": cuda_compiler.COMPILER, "flags": list(cuda_compiler.FLAGS),
                "archs": list(archs), "ptx": cuda_compiler.ptx_arch(archs),
                "source_key": source_key(source, archs), "toolkit": toolkit,
                "min_driver": cuda_compiler.minimum_driver(toolkit), **cache.versions()}
        (staging / _META).write_text(json.dumps(meta, indent=1))


def _prebuilt(kernels: Path, source: str, archs: Sequence[str]) -> Path:
    """Without nvcc: the library of `source` built elsewhere, for the newest toolkit whose
    minimum driver this machine's driver meets; KernelCompileError naming what is missing."""
    want = source_key(source, archs)
    driver = cuda_compiler.driver_cuda_version()
    found, too_new = [], []
    for meta_path in kernels.glob(f"*/{_META}"):
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if meta.get("source_key") != want or cache.entry_problem(meta_path.parent) is not None:
            continue
        if driver is not None and meta.get("min_driver", 0) > driver:
            too_new.append(meta.get("toolkit", "?"))
            continue
        found.append((tuple(int(p) for p in str(meta.get("toolkit", "0")).split(".")
                            if p.isdigit()), meta_path.parent))
    if found:
        return max(found)[1] / _LIBRARY
    if too_new:
        raise cuda_compiler.KernelCompileError(
            f"the cached kernel was built by CUDA {', '.join(sorted(set(too_new)))}, which "
            f"needs a newer driver than this machine's (CUDA "
            f"{driver // 1000}.{driver % 1000 // 10}); and there is no nvcc here to rebuild it")
    raise cuda_compiler.KernelCompileError(
        f"no nvcc here and no prebuilt kernel for this program in {kernels}: build it where "
        f"the CUDA toolkit is installed and ship it with `python -m mirage_jax cache export` "
        f"/ `cache import` (for architectures {','.join(archs)})")


def cuda_library_for(source: str, archs: Sequence[str]) -> Path:
    """The path of the compiled library of `source` for `archs`, compiling it on a miss (or,
    without nvcc, the one a build machine shipped)."""
    kernels = cache.cache_root() / "cuda_kernels"
    try:
        toolkit = cuda_compiler.toolkit_version()
    except cuda_compiler.KernelCompileError:
        return _prebuilt(kernels, source, archs)
    key = library_key(source, archs, toolkit)
    entry = kernels / key
    if entry.is_dir() and cache.entry_problem(entry) is None:
        return entry / _LIBRARY
    with cache.locked(kernels / ".locks" / f"{key}.lock"):
        if entry.exists():
            problem = cache.entry_problem(entry)
            if problem is None:
                return entry / _LIBRARY
            warnings.warn(
                f"mirage_jax: cached CUDA kernel library {entry} is corrupt ({problem}); "
                f"deleting and rebuilding it",
                RuntimeWarning,
                stacklevel=2,
            )
            shutil.rmtree(entry)
        _build_entry(kernels, key, source, archs)
    return entry / _LIBRARY

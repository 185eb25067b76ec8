"""The on-disk cache of compiled CUDA kernel libraries: the same layout, locking, staging and
checksums as the CPU cache (cache.py), in cache_root()/cuda_kernels, keyed also by nvcc's
flags, its version, the minimum driver it implies, and the target architectures. meta.json
records the toolkit and the minimum driver, for `cache list` and for a machine the cache is
exported to."""

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


def library_key(source: str, archs: Sequence[str]) -> str:
    import hashlib

    h = hashlib.sha256()
    toolkit = cuda_compiler.toolkit_version()
    for part in (source, cuda_compiler.COMPILER, *cuda_compiler.FLAGS,
                 *cuda_compiler.gencode_flags(archs), f"toolkit={toolkit}",
                 f"min_driver={cuda_compiler.minimum_driver(toolkit)}",
                 *sorted(f"{k}={v}" for k, v in cache.versions().items())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def _build_entry(kernels: Path, key: str, source: str, archs: Sequence[str]) -> None:
    with cache.staged_entry(kernels, key) as staging:
        (staging / _SOURCE).write_text(source)
        cuda_compiler.compile_shared_library(staging / _SOURCE, staging / _LIBRARY, archs)
        meta = {"kind": "cuda_kernel", "key": key, "sha256": cache.sha256_of(staging / _LIBRARY),
                "compiler": cuda_compiler.COMPILER, "flags": list(cuda_compiler.FLAGS),
                "archs": list(archs), "ptx": cuda_compiler.ptx_arch(archs),
                "toolkit": cuda_compiler.toolkit_version(),
                "min_driver": cuda_compiler.minimum_driver(cuda_compiler.toolkit_version()),
                **cache.versions()}
        (staging / _META).write_text(json.dumps(meta, indent=1))


def cuda_library_for(source: str, archs: Sequence[str]) -> Path:
    """The path of the compiled library of `source` for `archs`, compiling it on a miss."""
    kernels = cache.cache_root() / "cuda_kernels"
    key = library_key(source, archs)
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

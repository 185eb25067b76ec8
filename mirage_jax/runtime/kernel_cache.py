"""The on-disk cache of compiled CPU kernel libraries, in the shared store
(mirage_jax/cache/store.py) under cache_root()/kernels.

An entry is a directory named by the key (a hash of the source, the compiler flags, the
compiler's name and the mirage_jax and jaxlib versions) holding the source, the library and
meta.json with the library's sha256. An entry whose library does not match its checksum is
deleted and rebuilt with a warning.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

from mirage_jax.cache.store import cache_root, locked, sha256_of, staged_entry, versions
from mirage_jax.runtime import compiler

_SOURCE = "kernel.cc"
_LIBRARY = "kernel.so"
_META = "meta.json"


def library_key(source: str) -> str:
    """The cache key of the library built from `source` with the current compiler setup."""
    h = hashlib.sha256()
    for part in (source, compiler.COMPILER, *compiler.FLAGS,
                 *sorted(f"{k}={v}" for k, v in versions().items())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def entry_problem(entry: Path) -> str | None:
    """None when `entry` holds a library matching its checksum, else what is wrong."""
    try:
        meta = json.loads((entry / _META).read_text())
        actual = sha256_of(entry / _LIBRARY)
    except (OSError, ValueError) as e:
        return f"unreadable ({e})"
    if meta.get("sha256") != actual:
        return "its library does not match the recorded checksum"
    return None


def _build_entry(kernels: Path, key: str, source: str) -> None:
    with staged_entry(kernels, key) as staging:
        (staging / _SOURCE).write_text(source)
        compiler.compile_shared_library(staging / _SOURCE, staging / _LIBRARY)
        meta = {"kind": "kernel", "key": key, "sha256": sha256_of(staging / _LIBRARY),
                "compiler": compiler.COMPILER, "flags": list(compiler.FLAGS), **versions()}
        (staging / _META).write_text(json.dumps(meta, indent=1))


def shared_library_for(source: str) -> Path:
    """The path of the compiled library of `source`, compiling it on a cache miss."""
    kernels = cache_root() / "kernels"
    key = library_key(source)
    entry = kernels / key
    if entry.is_dir() and entry_problem(entry) is None:
        return entry / _LIBRARY
    with locked(kernels / ".locks" / f"{key}.lock"):
        # Another process may have built (or repaired) it while we waited for the lock.
        if entry.exists():
            problem = entry_problem(entry)
            if problem is None:
                return entry / _LIBRARY
            warnings.warn(
                f"mirage_jax: cached kernel library {entry} is corrupt ({problem}); "
                f"deleting and rebuilding it",
                RuntimeWarning,
                stacklevel=2,
            )
            shutil.rmtree(entry)
        _build_entry(kernels, key, source)
    return entry / _LIBRARY

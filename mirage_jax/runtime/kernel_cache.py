"""The on-disk cache of compiled kernel libraries, one directory per backend
(mirage_jax/runtime/backends.py) in the shared store (mirage_jax/cache/store.py).

An entry is a directory named by the key (a hash of the source, what the backend's key
covers: compiler, flags, target architectures; and the mirage_jax and jaxlib versions)
holding the source, the library and meta.json with the library's sha256. An entry whose
library does not match its checksum is deleted and rebuilt with a warning.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from mirage_jax.cache import store
from mirage_jax.runtime.backends import BACKENDS, CPU, Backend

LIBRARY = "kernel.so"
META = "meta.json"


def library_key(source: str, backend: Backend = CPU, options: dict[str, Any] | None = None) -> str:
    """The cache key of the library built from `source` with the backend's current setup."""
    options = backend.options() if options is None else options
    h = hashlib.sha256()
    built_with = backend.built_with(options)
    # In the order of the key's first version (source, compiler, flags, archs, versions), so
    # that caches filled before backends were records stay valid.
    parts = [source, built_with["compiler"], *built_with["flags"], *built_with.get("archs", ())]
    parts += sorted(f"{k}={v}" for k, v in store.versions().items())
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def entry_problem(entry: Path) -> str | None:
    """None when `entry` holds a library matching its checksum, else what is wrong."""
    try:
        meta = json.loads((entry / META).read_text())
        actual = store.sha256_of(entry / LIBRARY)
    except (OSError, ValueError) as e:
        return f"unreadable ({e})"
    if meta.get("sha256") != actual:
        return "its library does not match the recorded checksum"
    return None


for _backend in BACKENDS.values():
    store.register_kind(_backend.cache_kind, _backend.cache_directory, entry_problem)


def _build_entry(
    parent: Path, key: str, source: str, backend: Backend, options: dict[str, Any]
) -> None:
    with store.staged_entry(parent, key) as staging:
        (staging / backend.source_name).write_text(source)
        backend.build(staging / backend.source_name, staging / LIBRARY, options)
        meta = {
            "kind": backend.cache_kind,
            "key": key,
            "sha256": store.sha256_of(staging / LIBRARY),
            **backend.built_with(options),
            **store.versions(),
        }
        (staging / META).write_text(json.dumps(meta, indent=1))


def library_for(source: str, backend: Backend = CPU, options: dict[str, Any] | None = None) -> Path:
    """The path of the compiled library of `source` for `backend`, compiling it on a miss.
    `options`: the backend's options of this compilation (default: its current ones)."""
    options = backend.options() if options is None else options
    parent = store.cache_root() / backend.cache_directory
    key = library_key(source, backend, options)
    entry = parent / key
    if entry.is_dir() and entry_problem(entry) is None:
        return entry / LIBRARY
    with store.locked(parent / ".locks" / f"{key}.lock"):
        # Another process may have built (or repaired) it while we waited for the lock.
        if entry.exists():
            problem = entry_problem(entry)
            if problem is None:
                return entry / LIBRARY
            warnings.warn(
                f"mirage_jax: cached {backend.name} kernel library {entry} is corrupt "
                f"({problem}); deleting and rebuilding it",
                RuntimeWarning,
                stacklevel=2,
            )
            shutil.rmtree(entry)
        _build_entry(parent, key, source, backend, options)
    return entry / LIBRARY

"""Listing, verifying and clearing the on-disk caches (python -m mirage_jax cache ...).

Every kind of entry registered with the store (mirage_jax/cache/store.py: compiled kernels,
search results) lives under cache_root() in its own directory. Each entry is a directory
named by its key whose meta.json records checksums; each kind knows how to check its own
entries, and a kind whose entries hold code how to probe it (load it in a separate process).
This module knows no kind by name. Moving entries between machines is
mirage_jax/cache/archive.py.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mirage_jax.cache import store
from mirage_jax.cache.store import KINDS


@dataclasses.dataclass(frozen=True)
class Entry:
    kind: str
    key: str
    path: Path
    size: int  # bytes, all files of the entry
    age_s: float  # since it was written

    def problem(self, fresh_probe: bool = False) -> str | None:
        """None when the entry is sound: its kind's check of its files and, for code, the
        probe (from the entry's record of an earlier probe of the same bytes unless
        `fresh_probe`); else what is wrong."""
        return entry_problem(KINDS[self.kind], self.path, fresh_probe)

    def origin(self) -> str:
        """Where the entry came from, in words."""
        return describe_origin(store.origin_of(self.path))


def entry_problem(kind: store.Kind, path: Path, fresh_probe: bool = False) -> str | None:
    """Entry.problem for the entry of `kind` at `path`."""
    try:
        problem = kind.problem(path)
        if problem is None and kind.probe is not None:
            problem = kind.probe(path, fresh_probe)
    except (OSError, ValueError, KeyError) as e:  # changed while it was checked
        problem = f"it is unreadable ({type(e).__name__}: {e})"
    return problem


def problems(
    items: Iterable[tuple[store.Kind, Path]], fresh_probe: bool = False
) -> list[str | None]:
    """entry_problem of each (kind, path), in order. A probe is a child process that mostly
    waits on the loader: several run side by side."""
    items = list(items)

    def check(item: tuple[store.Kind, Path]) -> str | None:
        return entry_problem(item[0], item[1], fresh_probe)

    workers = max(1, min(8, os.cpu_count() or 1, len(items)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(check, items))


def describe_origin(origin: dict) -> str:
    how = origin.get("origin")
    if how == "compiled here":
        return "compiled here"
    if how == "imported":
        signer = origin.get("signer")
        return f"imported from {origin.get('archive')}, " + (
            f"signed by key {signer}" if signer else "unsigned (--trust-unsigned)"
        )
    return "origin not recorded"


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def entries(root: Path | None = None) -> Iterator[Entry]:
    """Every entry, by kind then key, whatever its shape (a damaged one may be a file).
    Names starting with '.' (locks, entries still being written) are not entries."""
    root = store.cache_root() if root is None else root
    now = time.time()
    for kind in KINDS.values():
        base = root / kind.directory
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            if path.name.startswith("."):
                continue
            try:
                size, age = _size(path), max(0.0, now - path.lstat().st_mtime)
            except OSError:  # removed meanwhile
                continue
            yield Entry(kind.name, path.name, path, size, age)


# Where an import stages the entries it reads (mirage_jax/cache/archive.py).
IMPORT_STAGING = ".importing"


def cache_directories(root: Path | None = None) -> list[Path]:
    """The directories `clear` removes: each kind's, locks and half-written entries
    included, what an interrupted import left, and the compilers' precompiled headers;
    nothing else under the root."""
    root = store.cache_root() if root is None else root
    names = [k.directory for k in KINDS.values()] + [IMPORT_STAGING, *store.MACHINE_DIRECTORIES]
    return [root / name for name in names if (root / name).exists()]


def human_size(size: float) -> str:
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB"):
        size /= 1024
        if size < 1024:
            return f"{size:.1f} {unit}"
    return f"{size / 1024:.1f} GiB"


def human_age(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f}{unit}"
    return f"{seconds:.0f}s"

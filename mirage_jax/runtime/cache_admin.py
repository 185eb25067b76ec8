"""Listing, verifying and clearing the on-disk caches (python -m mirage_jax cache ...).

Both caches live under cache_root(): compiled kernels in kernels/ (cache.py) and search
results in searches/ (search_cache.py). Each entry is a directory named by its key whose
meta.json records a checksum; each cache knows how to check its own entries.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mirage_jax.runtime import cache, search_cache

# kind -> (directory under the root, the check of one entry: None or what is wrong)
KINDS: dict[str, tuple[str, Callable[[Path], str | None]]] = {
    "kernel": ("kernels", cache.entry_problem),
    search_cache.KIND: (search_cache.DIRECTORY, search_cache.load_problem),
}


@dataclasses.dataclass(frozen=True)
class Entry:
    kind: str
    key: str
    path: Path
    size: int  # bytes, all files of the entry
    age_s: float  # since it was written

    def problem(self) -> str | None:
        return KINDS[self.kind][1](self.path)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def entries(root: Path | None = None) -> Iterator[Entry]:
    """Every entry, by kind then key. Names starting with '.' (locks, entries still being
    written) are not entries."""
    root = cache.cache_root() if root is None else root
    now = time.time()
    for kind, (directory, _) in KINDS.items():
        base = root / directory
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            if path.name.startswith(".") or not path.is_dir():
                continue
            yield Entry(kind, path.name, path, _size(path), max(0.0, now - path.stat().st_mtime))


def cache_directories(root: Path | None = None) -> list[Path]:
    """The directories `clear` removes: each kind's, locks and half-written entries
    included; nothing else under the root."""
    root = cache.cache_root() if root is None else root
    return [root / directory for directory, _ in KINDS.values() if (root / directory).exists()]


def human_size(size: float) -> str:
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}"


def human_age(seconds: float) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds / length:.0f}{unit}"
    return f"{seconds:.0f}s"

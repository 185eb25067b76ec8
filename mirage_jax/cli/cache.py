"""python -m mirage_jax cache {list,verify,clear,export,import}: the printing side of
mirage_jax/cache/admin.py."""

from __future__ import annotations

import shutil

# Importing the kernel and search caches registers their kinds of entries with the store,
# which is how the admin functions know them.
import mirage_jax.runtime.kernel_cache
import mirage_jax.superopt.search_cache  # noqa: F401
from mirage_jax.cache import admin as cache_admin
from mirage_jax.cache import store as cache


def run_cache(action: str, yes: bool = False, path: str | None = None) -> int:
    root = cache.cache_root()
    if action == "list":
        return _list(root)
    if action == "verify":
        return _verify(root)
    if action == "clear":
        return _clear(root, yes)
    if action in ("export", "import"):
        if not path:
            raise ValueError(f"cache {action}: an archive path is required")
        return (_export if action == "export" else _import)(root, path)
    raise ValueError(f"cache: unknown action {action!r} (list, verify, clear, export, import)")


def _list(root) -> int:
    found = list(cache_admin.entries(root))
    print(
        f"cache {root}: {len(found)} entries, {cache_admin.human_size(sum(e.size for e in found))}"
    )
    if found:
        print(f"  {'kind':<7} {'key':<32} {'size':>10} {'age':>5}")
    for e in found:
        print(
            f"  {e.kind:<7} {e.key:<32} {cache_admin.human_size(e.size):>10} "
            f"{cache_admin.human_age(e.age_s):>5}"
        )
    return 0


def _verify(root) -> int:
    corrupt = 0
    checked = 0
    for e in cache_admin.entries(root):
        checked += 1
        problem = e.problem()
        if problem is None:
            print(f"  ok       {e.kind:<7} {e.key}")
            continue
        corrupt += 1
        # A process may have the library loaded; removing the directory leaves its mapping
        # intact, and the next lookup rebuilds the entry.
        shutil.rmtree(e.path, ignore_errors=True)
        print(f"  CORRUPT  {e.kind:<7} {e.key}: {problem}; removed")
    print(
        f"cache {root}: {checked} entries checked, {corrupt} corrupt"
        + (" (removed; they are rebuilt when next needed)" if corrupt else "")
    )
    return 1 if corrupt else 0


def _clear(root, yes: bool) -> int:
    directories = cache_admin.cache_directories(root)
    found = list(cache_admin.entries(root))
    total = cache_admin.human_size(sum(e.size for e in found))
    if not yes:
        print(f"cache {root}: would remove {len(found)} entries ({total}):")
        for e in found:
            print(f"  {e.kind:<7} {e.key}")
        print(f"by removing {', '.join(str(d) for d in directories) or 'nothing'}")
        print("nothing removed; run again with --yes to remove them")
        return 0
    for d in directories:
        shutil.rmtree(d)
    print(f"cache {root}: removed {len(found)} entries ({total})")
    return 0


def _export(root, path) -> int:
    try:
        done = cache_admin.export_cache(path, root)
    except cache_admin.CacheArchiveError as e:
        print(f"cache export: {e}")
        return 1
    for kind, key, problem in done.skipped:
        print(f"  skipped  {kind:<7} {key}: corrupt ({problem})")
    for kind, key in done.done:
        print(f"  exported {kind:<7} {key}")
    print(
        f"cache {root}: exported {len(done.done)} entries to {done.archive} "
        f"({cache_admin.human_size(done.size)})"
        + (f"; {len(done.skipped)} corrupt entries left out" if done.skipped else "")
    )
    return 0


def _import(root, path) -> int:
    try:
        done = cache_admin.import_cache(path, root)
    except (cache_admin.CacheArchiveError, FileNotFoundError) as e:
        print(f"cache import: {e}")
        return 1
    for kind, key in done.done:
        print(f"  imported {kind:<7} {key}")
    for kind, key in done.present:
        print(f"  present  {kind:<7} {key}")
    for kind, key, why in done.refused:
        print(f"  REFUSED  {kind:<7} {key}: {why}")
    for note in done.notes:
        print(f"warning: {note}")
    print(
        f"cache {root}: imported {len(done.done)} entries from {done.archive} "
        f"({cache_admin.human_size(done.size)}), {len(done.present)} already present, "
        f"{len(done.refused)} refused"
        + (" (nothing of a refused entry was written)" if done.refused else "")
    )
    return 1 if done.refused else 0

"""The on-disk cache of compiled kernel libraries (DESIGN.md §7).

An entry is a directory named by the key (a hash of the source, the compiler flags, the
compiler's name and the mirage_jax and jaxlib versions) holding the source, the library and
meta.json with the library's sha256. Entries are built in a temporary directory and renamed
into place, under an fcntl lock per key, so concurrent processes never see half an entry and
never compile the same key twice. An entry whose library does not match its checksum is
deleted and rebuilt with a warning.

The search cache (search_cache.py) shares the root, the lock, the staging and the checksum
helpers defined here.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from importlib import metadata
from pathlib import Path

from mirage_jax.runtime import compiler

_SOURCE = "kernel.cc"
_LIBRARY = "kernel.so"
_META = "meta.json"


# Set by using_cache_root: a caller's explicit cache_dir wins over the environment, for the
# kernels compiled on its behalf too, without changing the environment of other threads.
_root_override: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "mirage_jax_cache_root", default=None)


def cache_root() -> Path:
    """The directory given to using_cache_root, else $MIRAGE_JAX_CACHE, else
    ~/.cache/mirage_jax."""
    override = _root_override.get()
    if override is not None:
        return override
    configured = os.environ.get("MIRAGE_JAX_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "mirage_jax"


@contextlib.contextmanager
def using_cache_root(path: os.PathLike | str):
    """Within the block (and this thread or task), cache_root() is `path`."""
    token = _root_override.set(Path(path))
    try:
        yield
    finally:
        _root_override.reset(token)


def versions() -> dict[str, str]:
    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "unknown"

    return {"mirage_jax": version("mirage_jax"), "jaxlib": version("jaxlib")}


def library_key(source: str) -> str:
    """The cache key of the library built from `source` with the current compiler setup."""
    h = hashlib.sha256()
    for part in (source, compiler.COMPILER, *compiler.FLAGS,
                 *sorted(f"{k}={v}" for k, v in versions().items())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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


@contextlib.contextmanager
def locked(lock_path: Path):
    """Holds an exclusive fcntl lock on `lock_path` (created if missing): across processes,
    and across threads too, since each holder opens the file anew."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def staged_entry(parent: Path, key: str):
    """Yields an empty temporary directory in `parent`; when the block ends normally it is
    renamed to parent/key in one step (readers see all of the entry or none of it), and when
    it raises the directory is removed. The caller holds the key's lock and has removed any
    old entry."""
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=parent))
    try:
        yield staging
        os.replace(staging, parent / key)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


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

"""The on-disk store every cache of mirage_jax shares: where it lives, the versions that key
its entries, per-key locks across processes, atomic publication of an entry, and checksums.

It knows nothing of what the entries hold: the kernel cache (mirage_jax/runtime/kernel_cache.py)
and the search cache (mirage_jax/superopt/search_cache.py) each keep their own kind of entry
under cache_root(), and register it here (register_kind) with the check of one entry, so that
listing, verifying, exporting and importing (mirage_jax/cache/admin.py) work on every kind.

An entry is a directory named by its key. It is built in a temporary directory and renamed
into place under an fcntl lock per key, so concurrent processes never see half an entry and
never build the same key twice.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# Set by using_cache_root: a caller's explicit cache_dir wins over the environment, for the
# kernels compiled on its behalf too, without changing the environment of other threads.
_root_override: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "mirage_jax_cache_root", default=None
)


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


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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


# -- kinds of entries ------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    name: str  # "kernel", "search", ...: what `cache list` shows
    directory: str  # under cache_root()
    # The check of one entry: None when it is sound, else what is wrong.
    problem: Callable[[Path], str | None]


KINDS: dict[str, Kind] = {}
# What else the entries' keys depend on, by name (the search cache: the C++ core's digest);
# an exported archive records these, and an import compares them with its own.
FINGERPRINTS: dict[str, Callable[[], str]] = {}


def register_kind(name: str, directory: str, problem: Callable[[Path], str | None]) -> Kind:
    kind = KINDS[name] = Kind(name, directory, problem)
    return kind


def register_fingerprint(name: str, fingerprint: Callable[[], str]) -> None:
    FINGERPRINTS[name] = fingerprint


def fingerprints() -> dict[str, str]:
    return {name: fingerprint() for name, fingerprint in FINGERPRINTS.items()}

"""The on-disk store every cache of mirage_jax shares: where it lives, the versions that key
its entries, per-key locks across processes, atomic publication of an entry, and checksums.

It knows nothing of what the entries hold: the kernel cache (mirage_jax/runtime/kernel_cache.py)
and the search cache (mirage_jax/superopt/search_cache.py) each keep their own kind of entry
under cache_root(), and register it here (register_kind) with the check of one entry, so that
listing, verifying, exporting and importing (mirage_jax/cache/admin.py) work on every kind.

An entry is a directory named by its key. It is built in a temporary directory and renamed
into place under an fcntl lock per key, so concurrent processes never see half an entry and
never build the same key twice. An entry that fails its kind's check, whatever its shape (a
file where the directory should be, a directory where a file should be, a symbolic link), is
removed whole (remove_entry) and built again.

Besides the files its kind writes, an entry may hold this machine's own records
(LOCAL_FILES: where the entry came from, and the probe of its library): they are never
exported, and an archive that carries one is refused.
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
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# Set by using_cache_root: a caller's explicit cache_dir wins over the environment, for the
# kernels compiled on its behalf too, without changing the environment of other threads.
_root_override: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "mirage_jax_cache_root", default=None
)


def cache_root() -> Path:
    """The directory given to using_cache_root, else $MIRAGE_JAX_CACHE, else
    ~/.cache/mirage_jax."""
    override = _root_override.get()
    return override if override is not None else machine_root()


def machine_root() -> Path:
    """$MIRAGE_JAX_CACHE, else ~/.cache/mirage_jax, whatever using_cache_root says: for what
    belongs to the machine rather than to one function's cache, which every fresh cache_dir
    would otherwise make again: the compilers' precompiled headers (MACHINE_DIRECTORIES,
    never exported) and the CPU calibration (superopt/calibration_cache.py, copied into the
    cache root that uses it)."""
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
    with open(path, "rb") as handle:  # in chunks: a library may be large
        return hashlib.file_digest(handle, "sha256").hexdigest()


def remove_entry(path: Path) -> None:
    """Removes whatever is at `path`: a directory tree, a file, a symbolic link (not what it
    points to). Nothing there is not an error."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path)


def load_entry(entry: Path, read: Callable[[Path], T]) -> T | None:
    """read(entry), or None when there is no entry; an entry that cannot be read is removed,
    so that its caller measures or builds it again."""
    if not entry.exists() and not entry.is_symlink():
        return None
    try:
        return read(entry)
    except Exception:
        remove_entry(entry)
        return None


def read_problem(read: Callable[[Path], object], what: str) -> Callable[[Path], str | None]:
    """A kind's check of one entry (register_kind's `problem`): whether read(entry) works."""

    def problem(entry: Path) -> str | None:
        try:
            read(entry)
        except Exception as e:
            return f"unreadable {what} ({type(e).__name__}: {e})"
        return None

    return problem


def ensure_directory(path: Path) -> Path:
    """`path` as an existing directory; a file or a dangling link in its place (a damaged
    cache) is removed first."""
    if (path.is_symlink() or path.exists()) and not path.is_dir():
        path.unlink()
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: Path, doc: dict) -> None:
    """Writes `doc` to `path` in one step (a temporary file renamed over it)."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# This machine's records in an entry: never exported, refused in an archive.
ORIGIN = "origin.json"  # where the entry came from (record_origin)
PROBE = "probe.json"  # the library's probe (mirage_jax/runtime/library_probe.py)
LOCAL_FILES = frozenset({ORIGIN, PROBE})


def record_origin(entry: Path, **origin: str | None) -> None:
    """Records where `entry` came from ("compiled here", an archive and its signer, ...)."""
    write_json(entry / ORIGIN, origin)


def origin_of(entry: Path) -> dict:
    """What record_origin recorded, else {} (an entry from an older version, or damaged)."""
    try:
        doc = json.loads((entry / ORIGIN).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


@contextlib.contextmanager
def locked(lock_path: Path):
    """Holds an exclusive fcntl lock on `lock_path` (created if missing): across processes,
    and across threads too, since each holder opens the file anew."""
    ensure_directory(lock_path.parent)
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
    ensure_directory(parent)
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
    # The check of one entry's files, loading nothing: None when it is sound, else what is
    # wrong.
    problem: Callable[[Path], str | None]
    # The names of the files an entry consists of; None: whatever its directory holds
    # (LOCAL_FILES aside). An archive entry with another file is refused.
    files: frozenset[str] | None = None
    # For entries that hold code: loads it in a separate process, after `problem` passed.
    # (entry, fresh) -> None when it loads, else what is wrong; fresh=False may answer from
    # the entry's record of an earlier probe of the same bytes.
    probe: Callable[[Path, bool], str | None] | None = None
    # What an archive's signed manifest states about an entry besides its files' hashes
    # (a library's: the hashes of its source and of itself, its handler), read from a sound
    # entry; an import refuses an entry whose files say otherwise.
    binding: Callable[[Path], dict[str, str]] | None = None


KINDS: dict[str, Kind] = {}
# Directories under machine_root() that hold no entries of a kind: build aids of this
# machine's compilers (mirage_jax/runtime/precompiled_header.py). `cache clear` removes
# them; nothing lists or exports them.
MACHINE_DIRECTORIES: set[str] = set()
# What else the entries' keys depend on, by name (the search cache: the C++ core's digest);
# an exported archive records these, and an import compares them with its own.
FINGERPRINTS: dict[str, Callable[[], str]] = {}


def register_kind(
    name: str,
    directory: str,
    problem: Callable[[Path], str | None],
    *,
    files: frozenset[str] | None = None,
    probe: Callable[[Path, bool], str | None] | None = None,
    binding: Callable[[Path], dict[str, str]] | None = None,
) -> Kind:
    kind = KINDS[name] = Kind(name, directory, problem, files, probe, binding)
    return kind


def register_fingerprint(name: str, fingerprint: Callable[[], str]) -> None:
    FINGERPRINTS[name] = fingerprint


def fingerprints() -> dict[str, str]:
    return {name: fingerprint() for name, fingerprint in FINGERPRINTS.items()}

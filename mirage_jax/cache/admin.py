"""Listing, verifying and clearing the on-disk caches (python -m mirage_jax cache ...).

Every kind of entry registered with the store (mirage_jax/cache/store.py: compiled kernels,
search results) lives under cache_root() in its own directory. Each entry is a directory
named by its key whose meta.json records a checksum; each kind knows how to check its own
entries. This module knows no kind by name.

export_cache / import_cache move sound entries between machines as one gzipped tar with a
manifest of every file's sha256 (deployment: search and compile once, serve elsewhere).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mirage_jax.cache import store
from mirage_jax.cache.store import KINDS


@dataclasses.dataclass(frozen=True)
class Entry:
    kind: str
    key: str
    path: Path
    size: int  # bytes, all files of the entry
    age_s: float  # since it was written

    def problem(self) -> str | None:
        return KINDS[self.kind].problem(self.path)


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def entries(root: Path | None = None) -> Iterator[Entry]:
    """Every entry, by kind then key. Names starting with '.' (locks, entries still being
    written) are not entries."""
    root = store.cache_root() if root is None else root
    now = time.time()
    for kind in KINDS.values():
        base = root / kind.directory
        if not base.is_dir():
            continue
        for path in sorted(base.iterdir()):
            if path.name.startswith(".") or not path.is_dir():
                continue
            yield Entry(
                kind.name, path.name, path, _size(path), max(0.0, now - path.stat().st_mtime)
            )


def cache_directories(root: Path | None = None) -> list[Path]:
    """The directories `clear` removes: each kind's, locks and half-written entries
    included; nothing else under the root."""
    root = store.cache_root() if root is None else root
    return [root / k.directory for k in KINDS.values() if (root / k.directory).exists()]


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


# -- export and import (python -m mirage_jax cache export|import PATH) -------------------

ARCHIVE_FORMAT = 1
MANIFEST = "mirage_jax_cache_manifest.json"
_KEY = re.compile(r"[0-9a-f]{32}")
_FILE_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


class CacheArchiveError(Exception):
    """The archive as a whole cannot be used (unreadable, not a mirage_jax cache archive)."""


@dataclasses.dataclass
class Transfer:
    """What an export or import did, entry by entry: (kind, key) pairs, and (kind, key, why)
    for those it left out."""

    archive: Path
    root: Path
    done: list = dataclasses.field(default_factory=list)
    present: list = dataclasses.field(default_factory=list)  # import: already sound here
    skipped: list = dataclasses.field(default_factory=list)  # export: corrupt here
    refused: list = dataclasses.field(default_factory=list)  # import: corrupt in the archive
    notes: list = dataclasses.field(default_factory=list)
    size: int = 0  # bytes of the archive (export) or of the entries written (import)


def _entry_files(path: Path) -> list[str]:
    return sorted(str(f.relative_to(path)) for f in path.rglob("*") if f.is_file())


def export_cache(archive: os.PathLike | str, root: Path | None = None) -> Transfer:
    """Writes every sound entry of the cache at `root` into the gzipped tar `archive`, with a
    manifest of each file's sha256. Corrupt entries are left out (Transfer.skipped)."""
    root = store.cache_root() if root is None else Path(root)
    archive = Path(archive)
    result = Transfer(archive=archive, root=root)
    manifest: dict[str, Any] = {
        "format": ARCHIVE_FORMAT,
        "versions": store.versions(),
        **store.fingerprints(),
        "entries": [],
    }
    chosen = []
    for e in entries(root):
        problem = e.problem()
        if problem is not None:
            result.skipped.append((e.kind, e.key, problem))
            continue
        files = {name: store.sha256_of(e.path / name) for name in _entry_files(e.path)}
        manifest["entries"].append({"kind": e.kind, "key": e.key, "files": files})
        chosen.append(e)
        result.done.append((e.kind, e.key))
    if not chosen:
        raise CacheArchiveError(
            f"cache {root} holds no sound entry to export"
            + (f" ({len(result.skipped)} corrupt)" if result.skipped else "")
            + "; run the program once with this cache to fill it"
        )
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.partial")
    try:
        with tarfile.open(partial, "w:gz") as tar:
            data = json.dumps(manifest, indent=1).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
            tar.addfile(info, io.BytesIO(data))
            for e in chosen:
                directory = KINDS[e.kind].directory
                for name in _entry_files(e.path):
                    tar.add(e.path / name, arcname=f"{directory}/{e.key}/{name}", recursive=False)
        os.replace(partial, archive)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    result.size = archive.stat().st_size
    return result


class _Refused(Exception):
    pass


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    if handle is None:  # not a regular file; callers treat it as an unreadable member
        raise AttributeError(f"{member.name} is not a regular file")
    return handle.read()


def _read_manifest(tar: tarfile.TarFile, archive: Path) -> dict:
    try:
        member = tar.getmember(MANIFEST)
        manifest = json.loads(_member_bytes(tar, member))
    except KeyError:
        raise CacheArchiveError(
            f"{archive} is not a mirage_jax cache archive (it has no "
            f"{MANIFEST}; make one with `cache export`)"
        ) from None
    except (ValueError, AttributeError, tarfile.TarError, OSError, EOFError) as e:
        raise CacheArchiveError(f"{archive}: its manifest is unreadable ({e})") from None
    found = manifest.get("format") if isinstance(manifest, dict) else None
    if found != ARCHIVE_FORMAT:
        raise CacheArchiveError(
            f"{archive}: archive format {found!r} is not the one this "
            f"version reads ({ARCHIVE_FORMAT})"
        )
    if not isinstance(manifest.get("entries"), list):
        raise CacheArchiveError(f"{archive}: its manifest lists no entries")
    return manifest


def _checked_files(tar: tarfile.TarFile, entry: dict, members: dict) -> dict[str, bytes]:
    """The entry's files, each read from the archive and matched against the manifest's
    sha256; _Refused names the first problem."""
    kind, key, files = entry.get("kind"), entry.get("key"), entry.get("files")
    if kind not in KINDS:
        raise _Refused(f"unknown kind {kind!r}")
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise _Refused(f"malformed key {key!r}")
    if not isinstance(files, dict) or not files:
        raise _Refused("the manifest lists no files for it")
    prefix = f"{KINDS[kind].directory}/{key}/"
    in_archive = {name[len(prefix) :] for name in members if name.startswith(prefix)}
    if in_archive != set(files):
        missing = sorted(set(files) - in_archive)
        extra = sorted(in_archive - set(files))
        raise _Refused(
            "files differ from the manifest"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unlisted {', '.join(extra)}" if extra else "")
        )
    contents = {}
    for name, digest in files.items():
        if not all(_FILE_PART.fullmatch(part) for part in name.split("/")):
            raise _Refused(f"unsafe file name {name!r}")
        member = members[prefix + name]
        if not member.isfile():
            raise _Refused(f"{name} is not a regular file")
        data = _member_bytes(tar, member)
        if hashlib.sha256(data).hexdigest() != digest:
            raise _Refused(
                f"{name} does not match its checksum (the archive is damaged or was altered)"
            )
        contents[name] = data
    return contents


def import_cache(archive: os.PathLike | str, root: Path | None = None) -> Transfer:
    """Adds the entries of a `cache export` archive to the cache at `root`. Every file is
    checked against the manifest's sha256 and every entry by its own cache's check before it
    is published (atomically, under the key's lock); an entry that fails either is refused
    (Transfer.refused) and nothing of it is written. Entries already sound here are kept."""
    root = store.cache_root() if root is None else Path(root)
    archive = Path(archive)
    result = Transfer(archive=archive, root=root)
    try:
        tar = tarfile.open(archive, "r:*")  # noqa: SIM115 (closed by the `with tar` below)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise CacheArchiveError(f"{archive} is not a readable cache archive ({e})") from None
    with tar:
        manifest = _read_manifest(tar, archive)
        try:
            members = {m.name: m for m in tar.getmembers()}
        except (tarfile.TarError, OSError, EOFError) as e:
            raise CacheArchiveError(f"{archive} is truncated or damaged ({e})") from None
        theirs, ours = manifest.get("versions"), store.versions()
        prints = store.fingerprints()
        if theirs != ours or any(manifest.get(name) != value for name, value in prints.items()):
            their_prints = "".join(f" ({name} {str(manifest.get(name))[:12]})" for name in prints)
            our_prints = "".join(f" ({name} {value[:12]})" for name, value in prints.items())
            result.notes.append(
                f"the archive was made by {theirs}{their_prints}, this installation is "
                f"{ours}{our_prints}: cache keys include these, so this installation will not "
                f"find its entries"
            )
        for entry in manifest["entries"]:
            kind, key = (
                (entry.get("kind"), entry.get("key")) if isinstance(entry, dict) else (None, None)
            )
            try:
                contents = _checked_files(tar, entry, members)
                # _checked_files refused any entry whose kind or key is not a known string
                if _publish(root, str(kind), str(key), contents):
                    result.done.append((kind, key))
                    result.size += sum(len(d) for d in contents.values())
                else:
                    result.present.append((kind, key))
            except _Refused as e:
                result.refused.append((str(kind), str(key), str(e)))
            except (tarfile.TarError, OSError, EOFError) as e:
                result.refused.append(
                    (str(kind), str(key), f"unreadable in the archive ({type(e).__name__}: {e})")
                )
    return result


def _publish(root: Path, kind: str, key: str, contents: dict[str, bytes]) -> bool:
    """Writes one checked entry; False when a sound one is already there."""
    check = KINDS[kind].problem
    parent = root / KINDS[kind].directory
    entry = parent / key
    with store.locked(parent / ".locks" / f"{key}.lock"):
        if entry.exists():
            if check(entry) is None:
                return False
            shutil.rmtree(entry)  # corrupt here, sound in the archive: replace it
        with store.staged_entry(parent, key) as staging:
            for name, data in contents.items():
                (staging / name).parent.mkdir(parents=True, exist_ok=True)
                (staging / name).write_bytes(data)
            problem = check(staging)
            if problem is not None:
                raise _Refused(f"the entry fails its cache's check: {problem}")
    return True

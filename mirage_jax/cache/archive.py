"""Moving sound cache entries between machines as one gzipped tar (python -m mirage_jax cache
export|import): search and compile once, serve elsewhere.

An archive is its manifest (mirage_jax/cache/manifest.py: every file's sha256 and size, and
what each kind of entry binds), then the manifest's signature when it was signed
(mirage_jax/cache/signing.py), then the entries' files. An import trusts nothing in it
before it is checked:

- The signature is checked first; an unsigned archive is refused unless the caller trusts
  it (`--trust-unsigned`, with a warning), since the libraries in it are code this machine
  will run.
- The archive is read as a stream, one member at a time. A member that is not a regular
  file the manifest lists, at the size it lists, stops the import before any of its bytes
  are read (links, devices, absolute or `..` paths, a member larger than stated, oversized
  tar extension headers); the manifest's total size is held to a limit before anything is
  extracted, and files are copied in chunks, so memory stays bounded whatever the archive.
- Every file is matched against its sha256, every entry against its kind's own check and
  the manifest's binding, and every library is probed in a separate process
  (mirage_jax/runtime/library_probe.py) before the entry is published, atomically, under
  its key's lock. An entry that fails any of these is refused by name; nothing of it is
  written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
import time
import zlib
from pathlib import Path
from typing import IO

from mirage_jax.cache import admin, signing, store
from mirage_jax.cache import manifest as manifest_format
from mirage_jax.cache.manifest import EntryRecord, FileRecord, Manifest, ManifestError
from mirage_jax.cache.store import KINDS

# An import refuses a manifest whose files add up to more (bytes): ten times the largest
# cache seen in deployment. `--max-size` raises it.
DEFAULT_MAX_BYTES = 8 * 1024**3
_CHUNK = 1024 * 1024
# pax and GNU long-name headers are read whole by tarfile; ours have none, and a few KiB is
# all a legitimate one needs.
_MAX_EXTENSION_HEADER = 64 * 1024
_EXTENSION_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.GNUTYPE_SPARSE,
)
# What reading a damaged compressed stream raises.
_READ_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError)


class CacheArchiveError(Exception):
    """The archive as a whole cannot be used; the message says why. Nothing was written."""


@dataclasses.dataclass
class Transfer:
    """What an export or import did, entry by entry: (kind, key) pairs, and (kind, key, why)
    for those it left out."""

    archive: Path
    root: Path
    done: list = dataclasses.field(default_factory=list)
    present: list = dataclasses.field(default_factory=list)  # import: already sound here
    skipped: list = dataclasses.field(default_factory=list)  # export: bad here
    refused: list = dataclasses.field(default_factory=list)  # import: bad in the archive
    notes: list = dataclasses.field(default_factory=list)
    size: int = 0  # bytes of the archive (export) or of the entries written (import)
    signer: str | None = None  # the fingerprint of the key that signed it, when checked


# -- export ----------------------------------------------------------------------------------


def _entry_files(entry: admin.Entry) -> dict[str, Path] | str:
    """The files of `entry` an archive carries, else what makes it unfit to export."""
    kind = KINDS[entry.kind]
    files = {}
    for path in sorted(entry.path.iterdir()):
        if path.name in store.LOCAL_FILES:
            continue
        if path.is_symlink() or not path.is_file():
            return f"{path.name} is not a regular file"
        if kind.files is not None and path.name not in kind.files:
            return f"it holds {path.name}, which is not a file of a {kind.name} entry"
        files[path.name] = path
    return files or "it is empty"


class _HashingReader(io.RawIOBase):
    """A file read through, hashing what is read (the bytes the archive gets)."""

    def __init__(self, handle: IO[bytes]):
        self._handle, self.sha256 = handle, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self.sha256.update(data)
        return data


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    tar.addfile(_member_info(name, len(data)), io.BytesIO(data))


def _member_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, int(time.time()), 0o644
    return info


def export_cache(
    archive: os.PathLike | str, root: Path | None = None, *, sign_with: Path | None = None
) -> Transfer:
    """Writes every sound entry of the cache at `root` into the gzipped tar `archive`, with a
    manifest of each file's sha256 and size, signed with the private key file `sign_with`
    when given (signing.SigningError when it cannot be used). Bad entries are left out
    (Transfer.skipped)."""
    root = store.cache_root() if root is None else Path(root)
    archive = Path(archive)
    result = Transfer(archive=archive, root=root)
    found = list(admin.entries(root))
    records, paths = [], []
    for e, problem in zip(found, admin.problems((KINDS[e.kind], e.path) for e in found)):
        files = _entry_files(e) if problem is None else problem
        if isinstance(files, str):
            result.skipped.append((e.kind, e.key, files))
            continue
        kind = KINDS[e.kind]
        records.append(
            EntryRecord(
                e.kind,
                e.key,
                {n: FileRecord(store.sha256_of(p), p.stat().st_size) for n, p in files.items()},
                kind.binding(e.path) if kind.binding is not None else None,
            )
        )
        paths.append(files)
        result.done.append((e.kind, e.key))
    if not records:
        raise CacheArchiveError(
            f"cache {root} holds no sound entry to export"
            + (f" ({len(result.skipped)} bad)" if result.skipped else "")
            + "; run the program once with this cache to fill it"
        )
    data = manifest_format.encode(Manifest(store.versions(), store.fingerprints(), records))
    signature = signing.sign(data, sign_with) if sign_with is not None else None
    result.signer = signing.signer_of(signature)[0] if signature is not None else None
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f".{archive.name}.partial")
    try:
        # ustar: no pax headers, which an import would refuse past a small size.
        with tarfile.open(partial, "w:gz", format=tarfile.USTAR_FORMAT) as tar:
            _add_bytes(tar, manifest_format.NAME, data)
            if signature is not None:
                _add_bytes(tar, manifest_format.SIGNATURE, signature)
            for record, files in zip(records, paths):
                for name, file in sorted(record.files.items()):
                    with open(files[name], "rb") as handle:
                        reader = _HashingReader(handle)
                        tar.addfile(_member_info(record.member(name), file.size), reader)
                    if reader.sha256.hexdigest() != file.sha256:
                        raise CacheArchiveError(
                            f"{files[name]} changed while it was exported; export again"
                        )
        os.replace(partial, archive)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    result.size = archive.stat().st_size
    return result


# -- import ----------------------------------------------------------------------------------


class _OversizedHeader(tarfile.HeaderError):
    pass


class _BoundedTarInfo(tarfile.TarInfo):
    """A TarInfo that refuses, before reading it, a tar extension header (pax, GNU long
    name, sparse map) larger than _MAX_EXTENSION_HEADER: tarfile reads those whole into
    memory."""

    def _proc_member(self, tarfile_: tarfile.TarFile):
        if self.type in _EXTENSION_TYPES and self.size > _MAX_EXTENSION_HEADER:
            raise _OversizedHeader(
                f"a tar extension header of {self.size} bytes (at most "
                f"{_MAX_EXTENSION_HEADER} are read)"
            )
        return super()._proc_member(tarfile_)  # type: ignore[misc]


_TYPE_NAMES = {
    tarfile.SYMTYPE: "a symbolic link",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.DIRTYPE: "a directory",
    tarfile.FIFOTYPE: "a FIFO",
    tarfile.CONTTYPE: "a contiguous file",
}


class _Stream:
    """The archive's members one at a time, each read at most once and in bounded pieces;
    every read error becomes a CacheArchiveError naming the archive."""

    def __init__(self, tar: tarfile.TarFile, archive: Path):
        self.tar, self.archive = tar, archive

    def next(self) -> tarfile.TarInfo | None:
        try:
            return self.tar.next()
        except _OversizedHeader as e:
            raise CacheArchiveError(f"{self.archive}: refusing it: it holds {e}") from None
        except _READ_ERRORS as e:
            raise CacheArchiveError(f"{self.archive} is truncated or damaged ({e})") from None

    def refuse_unless_regular(self, member: tarfile.TarInfo) -> None:
        name = member.name
        if name.startswith("/") or ".." in name.split("/"):
            raise CacheArchiveError(
                f"{self.archive}: refusing it: member {name!r} has an absolute or "
                f"parent-relative path"
            )
        if not member.isreg() or member.type == tarfile.CONTTYPE:
            what = _TYPE_NAMES.get(member.type, f"of tar type {member.type!r}")
            raise CacheArchiveError(
                f"{self.archive}: refusing it: member {name!r} is {what}; a cache archive "
                f"holds regular files only"
            )
        if member.sparse is not None:
            raise CacheArchiveError(f"{self.archive}: refusing it: member {name!r} is sparse")

    def read_small(self, member: tarfile.TarInfo, limit: int, what: str) -> bytes:
        self.refuse_unless_regular(member)
        if member.size > limit:
            raise CacheArchiveError(
                f"{self.archive}: refusing it: its {what} is {member.size} bytes (at most "
                f"{limit} are read)"
            )
        try:
            handle = self.tar.extractfile(member)
            data = handle.read(limit + 1) if handle is not None else b""
        except _READ_ERRORS as e:
            raise CacheArchiveError(f"{self.archive} is truncated or damaged ({e})") from None
        if len(data) != member.size:
            raise CacheArchiveError(f"{self.archive} is truncated or damaged ({what})")
        return data

    def copy(self, member: tarfile.TarInfo, path: Path) -> str:
        """Copies `member` to the new file `path` in chunks; its sha256."""
        digest = hashlib.sha256()
        written = 0
        handle = self.tar.extractfile(member)
        if handle is None:  # refuse_unless_regular let only regular files through
            raise CacheArchiveError(f"{self.archive}: member {member.name!r} has no data")
        with open(path, "xb") as out:
            while True:
                try:
                    chunk = handle.read(_CHUNK)
                except _READ_ERRORS as e:
                    raise CacheArchiveError(
                        f"{self.archive} is truncated or damaged ({e})"
                    ) from None
                if not chunk:
                    break
                written += len(chunk)
                if written > member.size:  # tarfile stops at the size; never more
                    raise CacheArchiveError(f"{self.archive}: member {member.name!r} overruns")
                digest.update(chunk)
                out.write(chunk)
        if written != member.size:
            raise CacheArchiveError(f"{self.archive} is truncated or damaged ({member.name})")
        return digest.hexdigest()


def _check_signature(
    archive: Path,
    data: bytes,
    signature: bytes | None,
    verify_with: Path | None,
    trust_unsigned: bool,
    notes: list,
) -> str | None:
    """The fingerprint of the key that signed the manifest `data`, checked against
    `verify_with`; None when the caller trusts the archive unchecked. CacheArchiveError
    when it may not be imported."""
    if verify_with is not None:
        if signature is None:
            raise CacheArchiveError(
                f"{archive} is not signed, and a public key was given to verify it: refusing it"
            )
        try:
            return signing.verify(data, signature, verify_with)
        except signing.SigningError as e:
            raise CacheArchiveError(f"{archive}: refusing it: {e}") from None
    if not trust_unsigned:
        if signature is not None:
            try:
                stated = f" (by key {signing.signer_of(signature)[0]})"
            except signing.SigningError:
                stated = ""
            raise CacheArchiveError(
                f"{archive} is signed{stated}, but no public key was given to check it: pass "
                f"--verify PUBLIC_KEY (or --trust-unsigned to import it unchecked)"
            )
        raise CacheArchiveError(
            f"{archive} is not signed: refusing to import kernel libraries nobody vouches "
            f"for (programs using this cache load and run them). Sign it with `cache export "
            f"--sign PRIVATE_KEY` and import it with `--verify PUBLIC_KEY`, or pass "
            f"--trust-unsigned if you made it yourself"
        )
    notes.append(
        "imported without checking a signature (--trust-unsigned): the kernel libraries in "
        f"{archive} will be loaded and run by programs using this cache; only a signature "
        f"from a key you trust says who built them"
    )
    return None


def _version_note(m: Manifest) -> str | None:
    ours, prints = store.versions(), store.fingerprints()
    if m.versions == ours and all(m.fingerprints.get(n) == v for n, v in prints.items()):
        return None
    their_prints = "".join(f" ({n} {str(m.fingerprints.get(n))[:12]})" for n in prints)
    our_prints = "".join(f" ({n} {v[:12]})" for n, v in prints.items())
    return (
        f"the archive was made by {m.versions}{their_prints}, this installation is "
        f"{ours}{our_prints}: cache keys include these, so this installation will not "
        f"find its entries"
    )


def _read_archive(
    stream: _Stream, first: tarfile.TarInfo | None, m: Manifest, staging: Path
) -> dict[tuple[str, str], str]:
    """Copies every member into staging/<kind directory>/<key>/<file>; the entries refused
    on the way (a file that does not match its checksum, or that the archive lacks), with
    why. CacheArchiveError at the first member that is not a regular file the manifest
    lists at the size it lists, before reading any of its bytes."""
    expected = {e.member(n): (e, n, r) for e in m.entries for n, r in e.files.items()}
    seen: set[str] = set()
    refused: dict[tuple[str, str], str] = {}
    member = first
    while member is not None:
        stream.refuse_unless_regular(member)
        if member.name not in expected:
            again = "appears twice" if member.name in seen else "is not listed in the manifest"
            raise CacheArchiveError(
                f"{stream.archive}: refusing it: member {member.name!r} {again}"
            )
        entry, name, record = expected.pop(member.name)
        seen.add(member.name)
        if member.size != record.size:
            raise CacheArchiveError(
                f"{stream.archive}: refusing it: member {member.name!r} is {member.size} bytes, "
                f"the manifest says {record.size}"
            )
        directory = staging / KINDS[entry.kind].directory / entry.key
        directory.mkdir(parents=True, exist_ok=True)
        if stream.copy(member, directory / name) != record.sha256:
            refused.setdefault(
                (entry.kind, entry.key),
                f"{name} does not match its checksum (the archive is damaged or was altered)",
            )
        member = stream.next()
    for entry, name, _ in expected.values():
        refused.setdefault((entry.kind, entry.key), f"the archive lacks its {name}")
    return refused


def _sound(kind: store.Kind, path: Path) -> bool:
    return admin.entry_problem(kind, path) is None


def _publish(root: Path, kind: store.Kind, key: str, staged: Path) -> bool:
    """Moves a checked entry into place; False when a sound one is already there."""
    parent = store.ensure_directory(root / kind.directory)
    entry = parent / key
    with store.locked(parent / ".locks" / f"{key}.lock"):
        if entry.exists() or entry.is_symlink():
            if _sound(kind, entry):
                return False
            store.remove_entry(entry)  # bad here, sound in the archive: replace it
        os.replace(staged, entry)
    return True


def _check_entries(
    m: Manifest, staging: Path, refused: dict[tuple[str, str], str]
) -> list[EntryRecord]:
    """The entries that pass their kind's check, their binding and the probe; the others
    are added to `refused`."""
    candidates = []
    for e in m.entries:
        if (e.kind, e.key) in refused:
            continue
        kind, path = KINDS[e.kind], staging / KINDS[e.kind].directory / e.key
        try:
            problem = kind.problem(path)
            if problem is None and kind.binding is not None and kind.binding(path) != e.binds:
                problem = f"its files state {kind.binding(path)}, the manifest {e.binds}"
        except (OSError, ValueError, KeyError) as error:
            problem = f"it is unreadable ({type(error).__name__}: {error})"
        if problem is not None:
            refused[(e.kind, e.key)] = f"the entry fails its cache's check: {problem}"
        else:
            candidates.append(e)
    probed = [e for e in candidates if KINDS[e.kind].probe is not None]
    results = admin.problems(
        ((KINDS[e.kind], staging / KINDS[e.kind].directory / e.key) for e in probed),
        fresh_probe=True,
    )
    for e, problem in zip(probed, results):
        if problem is not None:
            refused[(e.kind, e.key)] = f"its library fails the probe: {problem}"
    return [e for e in candidates if (e.kind, e.key) not in refused]


def _open_stream(archive: Path) -> tarfile.TarFile:
    """The archive opened as a stream (no seeking back: each member is read once)."""
    try:
        return tarfile.open(archive, "r|*", tarinfo=_BoundedTarInfo)
    except _OversizedHeader as e:
        raise CacheArchiveError(f"{archive}: refusing it: it holds {e}") from None
    except _READ_ERRORS as e:
        raise CacheArchiveError(f"{archive} is not a readable cache archive ({e})") from None


def import_cache(
    archive: os.PathLike | str,
    root: Path | None = None,
    *,
    verify_with: Path | None = None,
    trust_unsigned: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Transfer:
    """Adds the entries of a `cache export` archive to the cache at `root`.

    The archive must be signed by the key whose public half is `verify_with`, unless
    `trust_unsigned`. CacheArchiveError, with nothing written, when it is not, when its
    manifest is malformed or lists more than `max_bytes`, or when a member is not what the
    manifest lists. Otherwise each entry is checked (checksums, its kind's check, the
    manifest's binding, the probe of its library) and published atomically; one that fails
    is refused (Transfer.refused) and nothing of it is written. Entries already sound here
    are kept."""
    root = store.cache_root() if root is None else Path(root)
    archive = Path(archive)
    result = Transfer(archive=archive, root=root)
    if not archive.is_file():
        raise CacheArchiveError(f"{archive} does not exist or is not a file")
    staging_root = root / admin.IMPORT_STAGING
    staging: Path | None = None
    try:
        with _open_stream(archive) as tar:
            stream = _Stream(tar, archive)
            first = stream.next()
            if first is None or first.name != manifest_format.NAME:
                raise CacheArchiveError(
                    f"{archive} is not a mirage_jax cache archive (it does not begin with "
                    f"{manifest_format.NAME}; make one with `cache export`)"
                )
            data = stream.read_small(first, manifest_format.MAX_MANIFEST_BYTES, "manifest")
            member = stream.next()
            signature = None
            if member is not None and member.name == manifest_format.SIGNATURE:
                signature = stream.read_small(member, signing.MAX_SIGNATURE_BYTES, "signature")
                member = stream.next()
            result.signer = _check_signature(
                archive, data, signature, verify_with, trust_unsigned, result.notes
            )
            try:
                m = manifest_format.parse(data)
            except ManifestError as e:
                raise CacheArchiveError(f"{archive}: its manifest is malformed: {e}") from None
            if m.total_size > max_bytes:
                raise CacheArchiveError(
                    f"{archive}: refusing it: its manifest lists {m.total_size} bytes of files, "
                    f"more than the import limit of {max_bytes} (raise it with --max-size)"
                )
            note = _version_note(m)
            if note is not None:
                result.notes.append(note)
            staging = Path(
                tempfile.mkdtemp(prefix="import.", dir=store.ensure_directory(staging_root))
            )
            refused = _read_archive(stream, member, m, staging)
        for record in _check_entries(m, staging, refused):
            kind = KINDS[record.kind]
            staged = staging / kind.directory / record.key
            store.record_origin(
                staged, origin="imported", archive=str(archive.resolve()), signer=result.signer
            )
            if _publish(root, kind, record.key, staged):
                result.done.append((record.kind, record.key))
                result.size += sum(f.size for f in record.files.values())
            else:
                result.present.append((record.kind, record.key))
        result.refused = [(kind, key, why) for (kind, key), why in refused.items()]
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging_root.rmdir()  # when no other import is staging
    return result

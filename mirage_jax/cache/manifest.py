"""The manifest of a cache archive (python -m mirage_jax cache export|import): what it
holds, written by `encode` and read back by `parse`, which checks every field's type and
value and names the first that is wrong (ManifestError), so that a malformed manifest is one
clear error.

    {"format": 2,
     "versions": {"mirage_jax": ..., "jaxlib": ...},   # of the exporting installation
     "fingerprints": {"core": ...},                    # what else the keys depend on
     "entries": [{"kind": "kernel", "key": <32 hex>,
                  "files": {"kernel.so": {"sha256": <64 hex>, "size": <bytes>}, ...},
                  "binds": {"source_sha256": ..., "library_sha256": ..., "symbol": ...}}]}

"binds" is what the entry's kind states about it beyond its files (store.Kind.binding);
only kinds that have a binding carry it. A signature (mirage_jax/cache/signing.py) covers
the manifest's bytes, hence all of it.
"""

from __future__ import annotations

import dataclasses
import json
import re

from mirage_jax.cache import store

FORMAT = 2
NAME = "mirage_jax_cache_manifest.json"
SIGNATURE = "mirage_jax_cache_manifest.sig"
# Bytes: a manifest lists a few hundred bytes per entry.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024

_KEY = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


class ManifestError(Exception):
    """The manifest is malformed; the message names the field."""


@dataclasses.dataclass(frozen=True)
class FileRecord:
    sha256: str
    size: int


@dataclasses.dataclass(frozen=True)
class EntryRecord:
    kind: str
    key: str
    files: dict[str, FileRecord]
    binds: dict[str, str] | None

    def member(self, name: str) -> str:
        """The archive member holding file `name` of this entry."""
        return f"{store.KINDS[self.kind].directory}/{self.key}/{name}"


@dataclasses.dataclass(frozen=True)
class Manifest:
    versions: dict[str, str]
    fingerprints: dict[str, str]
    entries: list[EntryRecord]

    @property
    def total_size(self) -> int:
        return sum(f.size for e in self.entries for f in e.files.values())


def encode(manifest: Manifest) -> bytes:
    doc = {
        "format": FORMAT,
        "versions": manifest.versions,
        "fingerprints": manifest.fingerprints,
        "entries": [
            {
                "kind": e.kind,
                "key": e.key,
                "files": {n: dataclasses.asdict(f) for n, f in sorted(e.files.items())},
                **({"binds": e.binds} if e.binds is not None else {}),
            }
            for e in manifest.entries
        ],
    }
    return json.dumps(doc, indent=1).encode()


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _object(value: object, where: str, required: tuple[str, ...], optional=()) -> dict:
    if not isinstance(value, dict):
        raise ManifestError(f"{where} must be a JSON object, not {_type_name(value)}")
    missing = [k for k in required if k not in value]
    if missing:
        raise ManifestError(f"{where} lacks {', '.join(repr(k) for k in missing)}")
    unknown = sorted(str(k) for k in value if k not in required and k not in optional)
    if unknown:
        raise ManifestError(f"{where} has unknown fields {', '.join(map(repr, unknown))}")
    return value


def _text_map(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ManifestError(f"{where} must be a JSON object, not {_type_name(value)}")
    for k, v in value.items():
        if not isinstance(v, str):
            raise ManifestError(f"{where}[{k!r}] must be text, not {_type_name(v)}")
    return dict(value)


def _file(name: object, value: object, where: str, kind: store.Kind) -> tuple[str, FileRecord]:
    if not isinstance(name, str) or not _FILE_NAME.fullmatch(name):
        raise ManifestError(f"{where}: {name!r} is not a plain file name")
    if name in store.LOCAL_FILES or (kind.files is not None and name not in kind.files):
        raise ManifestError(f"{where}: a {kind.name} entry has no file {name!r}")
    record = _object(value, f"{where}[{name!r}]", ("sha256", "size"))
    digest, size = record["sha256"], record["size"]
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise ManifestError(f"{where}[{name!r}].sha256 must be 64 hex digits, not {digest!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ManifestError(f"{where}[{name!r}].size must be a non-negative integer, not {size!r}")
    return name, FileRecord(digest, size)


def _entry(value: object, where: str) -> EntryRecord:
    doc = _object(value, where, ("kind", "key", "files"), ("binds",))
    kind_name = doc["kind"]
    if not isinstance(kind_name, str) or kind_name not in store.KINDS:
        known = ", ".join(sorted(store.KINDS))
        raise ManifestError(
            f"{where}.kind {kind_name!r} is not a kind this version knows ({known})"
        )
    kind = store.KINDS[kind_name]
    key = doc["key"]
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ManifestError(f"{where}.key must be 32 lowercase hex digits, not {key!r}")
    files = doc["files"]
    if not isinstance(files, dict) or not files:
        raise ManifestError(f"{where}.files must be a non-empty JSON object, not {files!r:.60}")
    records = dict(_file(n, v, f"{where}.files", kind) for n, v in files.items())
    binds = None
    if kind.binding is not None:
        if "binds" not in doc:
            raise ManifestError(f"{where} lacks 'binds' (a {kind_name} entry states them)")
        binds = _text_map(doc["binds"], f"{where}.binds")
    elif "binds" in doc:
        raise ManifestError(f"{where}: a {kind_name} entry has no 'binds'")
    return EntryRecord(kind_name, key, records, binds)


def parse(data: bytes) -> Manifest:
    """The manifest in `data`; ManifestError naming the first thing wrong with it."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise ManifestError(f"it is not JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(doc, dict):
        raise ManifestError(f"it must be a JSON object, not {_type_name(doc)}")
    found = doc.get("format")
    if type(found) is not int or found != FORMAT:
        raise ManifestError(
            f"its format is {found!r}, not the one this version reads ({FORMAT}); export the "
            f"archive again with this version"
        )
    doc = _object(doc, "the manifest", ("format", "versions", "fingerprints", "entries"))
    versions = _text_map(doc["versions"], "versions")
    fingerprints = _text_map(doc["fingerprints"], "fingerprints")
    if not isinstance(doc["entries"], list):
        raise ManifestError(f"entries must be a JSON list, not {_type_name(doc['entries'])}")
    entries = [_entry(e, f"entries[{i}]") for i, e in enumerate(doc["entries"])]
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(entries):
        if (entry.kind, entry.key) in seen:
            raise ManifestError(f"entries[{i}] repeats {entry.kind} {entry.key}")
        seen.add((entry.kind, entry.key))
    return Manifest(versions, fingerprints, entries)

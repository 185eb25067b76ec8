"""What a crafted archive cannot do to `cache import`: make it read a member larger than the
manifest says or a manifest larger than the limit, hold a member in memory (a few MB of
gzip that inflate to hundreds: memory stays flat), write outside the cache through links or
devices, or crash it with a malformed manifest (one clear error, exit status 1, no
traceback)."""

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest
from cache_test_support import (
    cli_env,
    entry_keys,
    filled_cache,
    read_members,
    sha256,
    tamper,
    template_cache,
    write_members,
)

from mirage_jax.cache import archive as cache_archive
from mirage_jax.cache import manifest as manifest_format
from mirage_jax.cli.main import main

_ = (filled_cache, template_cache)

# Large enough that holding it shows in the peak RSS, small enough to write in a second.
BOMB_BYTES = 256 * 1024 * 1024
# The peak RSS an import may add over `cache list`'s (the same imports, no archive).
RSS_ALLOWANCE = 96 * 1024 * 1024


class Zeros(io.RawIOBase):
    def __init__(self, size):
        self.left = size

    def readable(self):
        return True

    def read(self, size=-1):
        n = self.left if size < 0 else min(size, self.left)
        self.left -= n
        return bytes(n)


def zeros_sha256(size):
    import hashlib

    h, chunk = hashlib.sha256(), bytes(1 << 20)
    for _ in range(size >> 20):
        h.update(chunk)
    h.update(bytes(size & ((1 << 20) - 1)))
    return h.hexdigest()


def bomb(path, manifest_doc, member, size):
    """An archive: the manifest, then `member` holding `size` zero bytes (gzip makes it a
    few hundred KB)."""
    data = json.dumps(manifest_doc).encode()
    with tarfile.open(path, "w:gz", format=tarfile.USTAR_FORMAT, compresslevel=1) as tar:
        info = tarfile.TarInfo(manifest_format.NAME)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(member)
        info.size = size
        tar.addfile(info, Zeros(size))
    return path


def search_manifest(key, size, digest):
    return {
        "format": manifest_format.FORMAT,
        "versions": {},
        "fingerprints": {},
        "entries": [
            {
                "kind": "search",
                "key": key,
                "files": {"result.json": {"sha256": digest, "size": size}},
            }
        ],
    }


def run_measured(argv, cache):
    """(exit status, peak RSS in bytes) of `python -m mirage_jax cache ARGV`: the child is
    reaped with wait4 to read its own peak."""
    process = subprocess.Popen(
        [sys.executable, "-P", "-m", "mirage_jax", "cache", *argv],
        env=cli_env(cache),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss * 1024


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bombs")
    key = "0" * 32
    member = f"searches/{key}/result.json"
    # the manifest states 1000 bytes; the member holds BOMB_BYTES
    lying = bomb(
        directory / "lying.tar.gz", search_manifest(key, 1000, "0" * 64), member, BOMB_BYTES
    )
    # the manifest states the size honestly, with the right checksum
    honest = bomb(
        directory / "honest.tar.gz",
        search_manifest(key, BOMB_BYTES, zeros_sha256(BOMB_BYTES)),
        member,
        BOMB_BYTES,
    )
    return lying, honest


def test_a_member_larger_than_the_manifest_says_is_refused_before_it_is_read(
    bombs, tmp_path, monkeypatch, capsys
):
    lying, _ = bombs
    assert lying.stat().st_size < 4 * 1024 * 1024
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "cache"))
    status = main(["cache", "import", str(lying), "--trust-unsigned"])
    out = capsys.readouterr().out
    assert status == 1
    assert (
        f"member 'searches/{'0' * 32}/result.json' is {BOMB_BYTES} bytes, the manifest says 1000"
        in out
    )
    assert not (tmp_path / "cache" / "searches").exists()
    assert not (tmp_path / "cache" / ".importing").exists()


def test_a_manifest_above_the_size_limit_is_refused_before_extracting(
    bombs, tmp_path, monkeypatch, capsys
):
    _, honest = bombs
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "cache"))
    status = main(["cache", "import", str(honest), "--trust-unsigned", "--max-size", "64M"])
    out = capsys.readouterr().out
    assert status == 1
    assert f"its manifest lists {BOMB_BYTES} bytes of files, more than the import limit of " in out
    assert "--max-size" in out
    assert not (tmp_path / "cache" / ".importing").exists()


def test_memory_stays_flat_whatever_the_archive_inflates_to(bombs, tmp_path):
    """Peak RSS of the import process, against `cache list`'s: the refused bomb and the
    honest one streamed to disk (then refused: it is no search result) add less than
    RSS_ALLOWANCE, though each inflates to BOMB_BYTES."""
    lying, honest = bombs
    status, baseline = run_measured(["list"], tmp_path / "cache")
    assert status == 0
    for archive in (lying, honest):
        status, peak = run_measured(["import", str(archive), "--trust-unsigned"], tmp_path / "c")
        assert status == 1
        assert peak < baseline + RSS_ALLOWANCE, (archive.name, peak, baseline)
    assert not (tmp_path / "c" / ".importing").exists()


def test_an_oversized_extension_header_is_refused_before_it_is_read(tmp_path, monkeypatch, capsys):
    archive = tmp_path / "pax.tar.gz"
    doc = search_manifest("0" * 32, 1, "0" * 64)
    data = json.dumps(doc).encode()
    with tarfile.open(archive, "w:gz", format=tarfile.PAX_FORMAT, compresslevel=1) as tar:
        info = tarfile.TarInfo(manifest_format.NAME)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(f"searches/{'0' * 32}/result.json")
        info.size = 1
        info.pax_headers = {"comment": "x" * (8 * 1024 * 1024)}  # read whole by tarfile
        tar.addfile(info, io.BytesIO(b"x"))
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "cache"))
    status = main(["cache", "import", str(archive), "--trust-unsigned"])
    out = capsys.readouterr().out
    assert status == 1 and "refusing it: it holds a tar extension header of " in out, out


@pytest.mark.parametrize(
    "kind, why",
    [
        (tarfile.SYMTYPE, "is a symbolic link"),
        (tarfile.LNKTYPE, "is a hard link"),
        (tarfile.CHRTYPE, "is a character device"),
        (tarfile.FIFOTYPE, "is a FIFO"),
        (tarfile.DIRTYPE, "is a directory"),
    ],
)
def test_links_and_devices_are_refused(filled_cache, tmp_path, monkeypatch, capsys, kind, why):
    archive = cache_archive.export_cache(tmp_path / "a.tar.gz", filled_cache).archive
    (key,) = entry_keys(filled_cache, "searches")
    name = f"searches/{key}/result.json"
    members = []
    for member, data in read_members(archive):
        if member.name == name:
            member = tarfile.TarInfo(name)
            member.type, member.linkname = kind, "/etc/passwd"
            data = b""
        members.append((member, data))
    bad = write_members(tmp_path / "bad.tar.gz", members)
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "target"))
    status = main(["cache", "import", str(bad), "--trust-unsigned"])
    out = capsys.readouterr().out
    assert status == 1
    assert out.strip() == (
        f"cache import: {bad}: refusing it: member {name!r} {why}; a cache archive holds "
        f"regular files only"
    )
    assert not (tmp_path / "target" / "searches").exists()


def _entry(doc):
    return doc["entries"][0]


MALFORMED = {
    "not JSON": (lambda doc: None, b"{not json", "its manifest is malformed: it is not JSON"),
    "a list": (lambda doc: None, b"[]", "it must be a JSON object, not list"),
    "deep nesting": (lambda doc: None, b"[" * 100000, "it is not JSON (RecursionError"),
    "no format": (lambda doc: doc.pop("format"), None, "its format is None, not the one"),
    "old format": (lambda doc: doc.update(format=1), None, "its format is 1, not the one"),
    "format as text": (lambda doc: doc.update(format="2"), None, "its format is '2'"),
    "entries not a list": (
        lambda doc: doc.update(entries={"a": 1}),
        None,
        "entries must be a JSON list, not dict",
    ),
    "entry of the wrong type": (
        lambda doc: doc["entries"].append("kernel"),
        None,
        "must be a JSON object, not str",
    ),
    "entry without files": (
        lambda doc: _entry(doc).pop("files"),
        None,
        "entries[0] lacks 'files'",
    ),
    "unknown kind": (
        lambda doc: _entry(doc).update(kind="plugin"),
        None,
        "entries[0].kind 'plugin' is not a kind this version knows",
    ),
    "kind of the wrong type": (
        lambda doc: _entry(doc).update(kind=["kernel"]),
        None,
        "entries[0].kind ['kernel'] is not a kind",
    ),
    "key of the wrong type": (
        lambda doc: _entry(doc).update(key=12345),
        None,
        "entries[0].key must be 32 lowercase hex digits, not 12345",
    ),
    "files as a list": (
        lambda doc: _entry(doc).update(files=["kernel.so"]),
        None,
        "entries[0].files must be a non-empty JSON object",
    ),
    "a file record as text (format 1)": (
        lambda doc: _entry(doc).update(files=dict.fromkeys(_entry(doc)["files"], "ab" * 32)),
        None,
        "must be a JSON object, not str",
    ),
    "a size as text": (
        lambda doc: [f.update(size="12") for f in _entry(doc)["files"].values()],
        None,
        ".size must be a non-negative integer, not '12'",
    ),
    "a size as a boolean": (
        lambda doc: [f.update(size=True) for f in _entry(doc)["files"].values()],
        None,
        ".size must be a non-negative integer, not True",
    ),
    "a negative size": (
        lambda doc: [f.update(size=-1) for f in _entry(doc)["files"].values()],
        None,
        ".size must be a non-negative integer, not -1",
    ),
    "a checksum as a number": (
        lambda doc: [f.update(sha256=7) for f in _entry(doc)["files"].values()],
        None,
        ".sha256 must be 64 hex digits, not 7",
    ),
    "a path as a file name": (
        lambda doc: _entry(doc)["files"].update({"../x": {"sha256": "0" * 64, "size": 1}}),
        None,
        "'../x' is not a plain file name",
    ),
    "a local record as a file": (
        lambda doc: _entry(doc)["files"].update({"probe.json": {"sha256": "0" * 64, "size": 1}}),
        None,
        "has no file 'probe.json'",
    ),
    "binds of the wrong type": (
        lambda doc: [e.update(binds="x") for e in doc["entries"] if e["kind"] == "kernel"],
        None,
        ".binds must be a JSON object, not str",
    ),
    "binds missing": (
        lambda doc: [e.pop("binds") for e in doc["entries"] if e["kind"] == "kernel"],
        None,
        "lacks 'binds' (a kernel entry states them)",
    ),
    "versions of the wrong type": (lambda doc: doc.update(versions=3), None, "versions must be"),
    "an unknown field": (lambda doc: _entry(doc).update(run="rm -rf /"), None, "unknown fields"),
    "a repeated entry": (
        lambda doc: doc["entries"].append(dict(_entry(doc))),
        None,
        "repeats",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_manifest_is_one_clear_error(filled_cache, tmp_path, monkeypatch, capsys, case):
    edit, raw, why = MALFORMED[case]
    archive = cache_archive.export_cache(tmp_path / "a.tar.gz", filled_cache).archive
    if raw is None:
        bad = tamper(archive, tmp_path / "bad.tar.gz", manifest=edit)
    else:
        members = [
            (m.name, raw if m.name == manifest_format.NAME else d) for m, d in read_members(archive)
        ]
        bad = write_members(tmp_path / "bad.tar.gz", members)
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "target"))
    status = main(["cache", "import", str(bad), "--trust-unsigned"])
    captured = capsys.readouterr()
    assert status == 1
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"cache import: {bad}: its manifest is malformed: "
    )
    assert why in lines[0], lines[0]
    assert captured.err == ""
    assert not (tmp_path / "target" / "kernels").exists()


def test_a_malformed_manifest_shows_no_traceback_on_the_command_line(filled_cache, tmp_path):
    archive = cache_archive.export_cache(tmp_path / "a.tar.gz", filled_cache).archive
    bad = tamper(archive, tmp_path / "bad.tar.gz", manifest=lambda doc: doc["entries"].append(7))
    done = subprocess.run(
        [sys.executable, "-P", "-m", "mirage_jax", "cache", "import", str(bad), "--trust-unsigned"],
        env=cli_env(tmp_path / "target"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    assert "entries[3] must be a JSON object, not int" in done.stdout


def test_the_checksum_of_zeros_helper_is_right():
    assert zeros_sha256(3 << 20 | 5) == sha256(bytes(3 << 20 | 5))

"""python -m mirage_jax cache export|import PATH: sound entries travel in one archive and
arrive byte for byte; a damaged or altered archive entry is refused, with a message naming it,
and nothing of it is written."""

import io
import json
import os
import subprocess
import sys
import tarfile

import pytest
from search_test_support import CONFIG, Searches, graphs

from mirage_jax.cache import admin as cache_admin
from mirage_jax.cli.main import main
from mirage_jax.runtime import kernel_cache, toolchain
from mirage_jax.superopt import search_cache


@pytest.fixture
def source(monkeypatch, tmp_path):
    """A cache with one search entry and two kernel entries (a stand-in g++ builds them)."""
    path = tmp_path / "source"
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(path))

    def fake_compiler(src, library):
        library.write_bytes(b"compiled:" + src.read_bytes())

    monkeypatch.setattr(toolchain, "compile_cpu_library", fake_compiler)
    search_cache.cached_search(graphs()[0], CONFIG, "cpu", Searches())
    kernel_cache.library_for("// kernel one")
    kernel_cache.library_for("// kernel two")
    return path


def files_of(root):
    """{relative path: bytes} of every entry file (locks and staging excluded)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def cli(monkeypatch, capsys, root, *argv):
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(root))
    status = main(["cache", *argv])
    return status, capsys.readouterr().out


def rewrite(archive, out, *, replace=None, manifest=None, extra=None):
    """A copy of `archive` with some members' bytes replaced, the manifest edited, or extra
    members added: what a damaged or altered archive looks like."""
    replace, extra = replace or {}, extra or {}
    with tarfile.open(archive) as src, tarfile.open(out, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if member.name == cache_admin.MANIFEST and manifest is not None:
                doc = json.loads(data)
                manifest(doc)
                data = json.dumps(doc).encode()
            data = replace.get(member.name, data)
            info = tarfile.TarInfo(member.name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
        for name, data in extra.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    return out


def test_export_then_import_reproduces_every_entry(source, tmp_path, monkeypatch, capsys):
    archive = tmp_path / "kernels.tar.gz"
    status, out = cli(monkeypatch, capsys, source, "export", str(archive))
    assert status == 0, out
    assert f"exported 3 entries to {archive}" in out
    assert out.count("  exported kernel ") == 2 and out.count("  exported search ") == 1

    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(archive))
    assert status == 0, out
    assert "imported 3 entries" in out and "0 refused" in out
    assert files_of(target) == files_of(source) and len(files_of(source)) == 8
    assert "3 entries checked, 0 corrupt" in cli(monkeypatch, capsys, target, "verify")[1]
    # the imported search entry answers a lookup: no search runs
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(target))
    searches = Searches()
    _, hit = search_cache.cached_search(graphs()[0], CONFIG, "cpu", searches)
    assert hit and searches.calls == 0

    status, out = cli(monkeypatch, capsys, target, "import", str(archive))
    assert status == 0 and "imported 0 entries" in out and "3 already present" in out


def test_an_altered_file_is_refused_and_the_rest_imported(source, tmp_path, monkeypatch, capsys):
    archive = tmp_path / "good.tar.gz"
    cache_admin.export_cache(archive, source)
    key = sorted(p.name for p in (source / "kernels").iterdir() if p.name != ".locks")[0]
    bad = rewrite(
        archive,
        tmp_path / "bad.tar.gz",
        replace={f"kernels/{key}/kernel.so": b"compiled:// something else"},
    )
    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(bad))
    assert status == 1
    assert (
        f"REFUSED  kernel  {key}: kernel.so does not match its checksum (the archive is "
        f"damaged or was altered)"
    ) in out
    assert "imported 2 entries" in out and "1 refused" in out
    assert not (target / "kernels" / key).exists()
    assert len([p for p in (target / "kernels").iterdir() if not p.name.startswith(".")]) == 1


def test_a_consistent_but_wrong_entry_fails_its_own_check(source, tmp_path, monkeypatch, capsys):
    """A library replaced together with the manifest's checksum still contradicts the
    entry's own meta.json: the cache's check refuses it before it is published."""
    archive = tmp_path / "good.tar.gz"
    cache_admin.export_cache(archive, source)
    key = sorted(p.name for p in (source / "kernels").iterdir() if p.name != ".locks")[0]
    evil = b"not the library that was compiled"

    def fix_manifest(doc):
        import hashlib

        for e in doc["entries"]:
            if e["key"] == key:
                e["files"]["kernel.so"] = hashlib.sha256(evil).hexdigest()

    bad = rewrite(
        archive,
        tmp_path / "bad.tar.gz",
        manifest=fix_manifest,
        replace={f"kernels/{key}/kernel.so": evil},
    )
    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(bad))
    assert status == 1
    assert (
        f"REFUSED  kernel  {key}: the entry fails its cache's check: its library does "
        f"not match the recorded checksum" in out
    )
    assert not (target / "kernels" / key).exists()
    assert not [p for p in (target / "kernels").iterdir() if p.name.startswith(f".{key}")]


def test_unlisted_files_and_unsafe_names_are_refused(source, tmp_path, monkeypatch, capsys):
    archive = tmp_path / "good.tar.gz"
    cache_admin.export_cache(archive, source)
    (search_key,) = [p.name for p in (source / "searches").iterdir() if p.name != ".locks"]

    def unsafe(doc):
        for e in doc["entries"]:
            if e["kind"] == "search":
                e["files"]["../../escape"] = "0" * 64

    bad = rewrite(
        archive,
        tmp_path / "bad.tar.gz",
        manifest=unsafe,
        extra={f"searches/{search_key}/../../escape": b"x"},
    )
    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(bad))
    assert status == 1
    assert f"REFUSED  search  {search_key}: unsafe file name '../../escape'" in out
    assert not (tmp_path / "escape").exists() and not (target / "escape").exists()

    extra = rewrite(
        archive, tmp_path / "extra.tar.gz", extra={f"searches/{search_key}/payload.sh": b"echo hi"}
    )
    status, out = cli(monkeypatch, capsys, tmp_path / "target2", "import", str(extra))
    assert status == 1
    assert (
        f"REFUSED  search  {search_key}: files differ from the manifest; unlisted payload.sh" in out
    )


def test_export_leaves_out_corrupt_entries(source, tmp_path, monkeypatch, capsys):
    key = sorted(p.name for p in (source / "kernels").iterdir() if p.name != ".locks")[0]
    (source / "kernels" / key / "kernel.so").write_bytes(b"tampered")
    archive = tmp_path / "kernels.tar.gz"
    status, out = cli(monkeypatch, capsys, source, "export", str(archive))
    assert status == 0
    assert f"skipped  kernel  {key}: corrupt (its library does not match" in out
    assert "exported 2 entries" in out and "1 corrupt entries left out" in out
    with tarfile.open(archive) as tar:
        assert not [n for n in tar.getnames() if key in n]


def test_a_local_corrupt_entry_is_replaced_by_the_archives(source, tmp_path, monkeypatch, capsys):
    archive = tmp_path / "kernels.tar.gz"
    cache_admin.export_cache(archive, source)
    target = tmp_path / "target"
    cache_admin.import_cache(archive, target)
    key = sorted(p.name for p in (target / "kernels").iterdir() if p.name != ".locks")[0]
    (target / "kernels" / key / "kernel.so").write_bytes(b"tampered")
    status, out = cli(monkeypatch, capsys, target, "import", str(archive))
    assert status == 0 and f"imported kernel  {key}" in out and "2 already present" in out
    assert files_of(target) == files_of(source)


def test_what_is_not_an_archive_is_refused_with_a_reason(tmp_path, monkeypatch, capsys):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not a tar file")
    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(junk))
    assert status == 1 and f"cache import: {junk} is not a readable cache archive" in out

    plain = tmp_path / "plain.tar.gz"
    with tarfile.open(plain, "w:gz") as tar:
        info = tarfile.TarInfo("kernels/readme.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    status, out = cli(monkeypatch, capsys, target, "import", str(plain))
    assert status == 1 and "is not a mirage_jax cache archive" in out

    status, out = cli(monkeypatch, capsys, target, "import", str(tmp_path / "missing.tgz"))
    assert status == 1 and "missing.tgz" in out
    assert not target.exists() or files_of(target) == {}


def test_exporting_an_empty_cache_says_so(tmp_path, monkeypatch, capsys):
    status, out = cli(monkeypatch, capsys, tmp_path / "empty", "export", str(tmp_path / "a.tar.gz"))
    assert status == 1 and "holds no sound entry to export" in out
    assert not (tmp_path / "a.tar.gz").exists()


def test_the_command_line_round_trip(source, tmp_path):
    archive = tmp_path / "kernels.tar.gz"
    env = {**os.environ, "MIRAGE_JAX_CACHE": str(source)}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "mirage_jax", "cache", "export", str(archive)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    target = tmp_path / "target"
    done = subprocess.run(
        [sys.executable, "-P", "-m", "mirage_jax", "cache", "import", str(archive)],
        env={**env, "MIRAGE_JAX_CACHE": str(target)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert files_of(target) == files_of(source)

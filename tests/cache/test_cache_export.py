"""python -m mirage_jax cache export|import PATH: sound entries travel in one archive and
arrive byte for byte; a damaged or altered entry is refused, with a message naming it, and
nothing of it is written."""

import json
import subprocess
import sys
import tarfile

from cache_test_support import (
    cli_env,
    entry_keys,
    exported_files,
    filled_cache,
    keys,
    read_members,
    sha256,
    tamper,
    template_cache,
)
from search_test_support import CONFIG, Searches, graphs

from mirage_jax.cache import archive as cache_archive
from mirage_jax.cache import manifest as manifest_format
from mirage_jax.cache import store
from mirage_jax.cli.main import main
from mirage_jax.superopt import search_cache

# the fixtures used by name below
_ = (filled_cache, keys, template_cache)


def cli(monkeypatch, capsys, root, *argv):
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(root))
    status = main(["cache", *map(str, argv)])
    return status, capsys.readouterr().out


def signed_export(filled_cache, keys, archive):
    cache_archive.export_cache(archive, filled_cache, sign_with=keys["ours"][0])
    return archive


def test_export_then_import_reproduces_every_entry(
    filled_cache, keys, tmp_path, monkeypatch, capsys
):
    archive = tmp_path / "kernels.tar.gz"
    private, public = keys["ours"]
    status, out = cli(monkeypatch, capsys, filled_cache, "export", str(archive), "--sign", private)
    assert status == 0, out
    assert f"exported 3 entries to {archive}" in out and "signed by key " in out
    assert out.count("  exported kernel ") == 2 and out.count("  exported search ") == 1

    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(archive), "--verify", public)
    assert status == 0, out
    assert "signature: good, key " in out
    assert "imported 3 entries" in out and "0 refused" in out
    assert exported_files(target) == exported_files(filled_cache)
    assert len(exported_files(filled_cache)) == 8
    status, out = cli(monkeypatch, capsys, target, "verify")
    assert status == 0 and "3 entries checked, 0 bad" in out, out
    assert out.count("imported from ") == 3 and "signed by key " in out
    # the imported search entry answers a lookup: no search runs
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(target))
    searches = Searches()
    _, hit = search_cache.cached_search(graphs()[0], CONFIG, "cpu", searches)
    assert hit and searches.calls == 0

    status, out = cli(monkeypatch, capsys, target, "import", str(archive), "--verify", public)
    assert status == 0 and "imported 0 entries" in out and "3 already present" in out


def test_the_archive_holds_the_manifest_first_then_the_signature_and_no_local_records(
    filled_cache, keys, tmp_path
):
    archive = signed_export(filled_cache, keys, tmp_path / "a.tar.gz")
    members = read_members(archive)
    names = [m.name for m, _ in members]
    assert names[:2] == [manifest_format.NAME, manifest_format.SIGNATURE]
    assert not [n for n in names if n.endswith(("probe.json", "origin.json"))]
    assert all(m.isreg() and not m.pax_headers for m, _ in members)
    doc = json.loads(members[0][1])
    (kernel,) = [e for e in doc["entries"] if e["key"] == entry_keys(filled_cache, "kernels")[0]]
    files = {m.name: d for m, d in members}
    prefix = f"kernels/{kernel['key']}/"
    # each library is bound to its source's hash and its handler; its key hashes the source
    assert kernel["binds"]["library_sha256"] == sha256(files[prefix + "kernel.so"])
    assert kernel["binds"]["source_sha256"] == sha256(files[prefix + "kernel.cc"])
    assert kernel["files"]["kernel.so"]["size"] == len(files[prefix + "kernel.so"])


def test_an_altered_file_is_refused_and_the_rest_imported(
    filled_cache, keys, tmp_path, monkeypatch, capsys
):
    archive = signed_export(filled_cache, keys, tmp_path / "good.tar.gz")
    key = entry_keys(filled_cache, "kernels")[0]
    name = f"kernels/{key}/kernel.so"
    original = {m.name: d for m, d in read_members(archive)}[name]
    altered = original[:-4] + b"\x00\x00\x00\x01"  # the same size, other bytes
    bad = tamper(archive, tmp_path / "bad.tar.gz", replace={name: altered})
    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(bad), "--verify", keys["ours"][1])
    assert status == 1
    assert (
        f"REFUSED  kernel  {key}: kernel.so does not match its checksum (the archive is "
        f"damaged or was altered)"
    ) in out
    assert "imported 2 entries" in out and "1 refused" in out
    assert not (target / "kernels" / key).exists()
    assert len(entry_keys(target, "kernels")) == 1
    assert not (target / ".importing").exists()


def test_a_consistent_but_wrong_entry_fails_its_own_check(
    filled_cache, tmp_path, monkeypatch, capsys
):
    """A source replaced together with every checksum that covers it (the manifest's and
    the entry's meta.json): the key no longer hashes the source, so the entry is refused
    before it is published."""
    archive = cache_archive.export_cache(tmp_path / "good.tar.gz", filled_cache).archive
    key = entry_keys(filled_cache, "kernels")[0]
    prefix = f"kernels/{key}/"
    files = {m.name: d for m, d in read_members(archive)}
    source = b'extern "C" int something_else(void) { return 2; }\n'
    meta = json.loads(files[prefix + "meta.json"])
    meta["source_sha256"] = sha256(source)
    meta_bytes = json.dumps(meta).encode()

    def fix_manifest(doc):
        for e in doc["entries"]:
            if e["key"] == key:
                e["files"]["kernel.cc"] = {"sha256": sha256(source), "size": len(source)}
                e["files"]["meta.json"] = {"sha256": sha256(meta_bytes), "size": len(meta_bytes)}
                e["binds"]["source_sha256"] = sha256(source)

    bad = tamper(
        archive,
        tmp_path / "bad.tar.gz",
        manifest=fix_manifest,
        replace={prefix + "kernel.cc": source, prefix + "meta.json": meta_bytes},
    )
    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(bad), "--trust-unsigned")
    assert status == 1
    assert (
        f"REFUSED  kernel  {key}: the entry fails its cache's check: its key is not the hash "
        f"of its source, compiler, flags and versions" in out
    ), out
    assert not (target / "kernels" / key).exists()
    assert not [p for p in (target / "kernels").iterdir() if p.name.startswith(f".{key}")]


def test_a_binding_that_contradicts_the_files_is_refused(
    filled_cache, tmp_path, monkeypatch, capsys
):
    archive = cache_archive.export_cache(tmp_path / "good.tar.gz", filled_cache).archive
    key = entry_keys(filled_cache, "kernels")[0]

    def rebind(doc):
        for e in doc["entries"]:
            if e["key"] == key:
                e["binds"]["symbol"] = "mj_some_other_handler"

    bad = tamper(archive, tmp_path / "bad.tar.gz", manifest=rebind)
    status, out = cli(
        monkeypatch, capsys, tmp_path / "target", "import", str(bad), "--trust-unsigned"
    )
    assert status == 1
    assert f"REFUSED  kernel  {key}: the entry fails its cache's check: its files state" in out
    assert "'symbol': 'mj_some_other_handler'" in out


def test_unlisted_members_and_unsafe_names_refuse_the_archive(
    filled_cache, tmp_path, monkeypatch, capsys
):
    archive = cache_archive.export_cache(tmp_path / "good.tar.gz", filled_cache).archive
    (search_key,) = entry_keys(filled_cache, "searches")
    target = tmp_path / "target"
    cases = {
        f"searches/{search_key}/payload.sh": "is not listed in the manifest",
        f"searches/{search_key}/../../escape": "has an absolute or parent-relative path",
        "/tmp/absolute": "has an absolute or parent-relative path",
        f"searches/{search_key}/result.json": "appears twice",
    }
    for name, why in cases.items():
        bad = tamper(archive, tmp_path / "bad.tar.gz", extra=[(name, b"echo hi")])
        status, out = cli(monkeypatch, capsys, target, "import", str(bad), "--trust-unsigned")
        assert status == 1, out
        assert out.strip() == f"cache import: {bad}: refusing it: member {name!r} {why}", out
        assert not (target / "searches").exists() or entry_keys(target, "searches") == []
        assert not (tmp_path / "escape").exists()
    assert not (target / ".importing").exists()


def test_export_leaves_out_bad_entries(filled_cache, tmp_path, monkeypatch, capsys):
    key = entry_keys(filled_cache, "kernels")[0]
    (filled_cache / "kernels" / key / "kernel.so").write_bytes(b"tampered")
    archive = tmp_path / "kernels.tar.gz"
    status, out = cli(monkeypatch, capsys, filled_cache, "export", str(archive))
    assert status == 0
    assert f"skipped  kernel  {key}: bad (its library does not match" in out
    assert "exported 2 entries" in out and "1 bad entries left out" in out
    assert "unsigned" in out and "--trust-unsigned" in out
    with tarfile.open(archive) as tar:
        assert not [n for n in tar.getnames() if key in n]


def test_a_local_bad_entry_is_replaced_by_the_archives(filled_cache, tmp_path, monkeypatch, capsys):
    archive = cache_archive.export_cache(tmp_path / "kernels.tar.gz", filled_cache).archive
    target = tmp_path / "target"
    cache_archive.import_cache(archive, target, trust_unsigned=True)
    first, second = entry_keys(target, "kernels")
    (target / "kernels" / first / "kernel.so").write_bytes(b"tampered")
    store.remove_entry(target / "kernels" / second)
    (target / "kernels" / second).write_text("a file where the entry's directory should be")
    status, out = cli(monkeypatch, capsys, target, "import", str(archive), "--trust-unsigned")
    assert status == 0, out
    assert f"imported kernel  {first}" in out and f"imported kernel  {second}" in out
    assert "1 already present" in out
    assert exported_files(target) == exported_files(filled_cache)


def test_what_is_not_an_archive_is_refused_with_a_reason(tmp_path, monkeypatch, capsys):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"this is not a tar file")
    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(junk), "--trust-unsigned")
    assert status == 1 and f"cache import: {junk} is not a readable cache archive" in out

    plain = tmp_path / "plain.tar.gz"
    with tarfile.open(plain, "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("kernels/readme.txt"))
    status, out = cli(monkeypatch, capsys, target, "import", str(plain), "--trust-unsigned")
    assert status == 1 and "is not a mirage_jax cache archive" in out

    missing = tmp_path / "missing.tgz"
    status, out = cli(monkeypatch, capsys, target, "import", str(missing), "--trust-unsigned")
    assert status == 1 and out.strip() == f"cache import: {missing} does not exist or is not a file"
    assert not target.exists() or exported_files(target) == {}


def test_exporting_an_empty_cache_says_so(tmp_path, monkeypatch, capsys):
    status, out = cli(monkeypatch, capsys, tmp_path / "empty", "export", str(tmp_path / "a.tar.gz"))
    assert status == 1 and "holds no sound entry to export" in out
    assert not (tmp_path / "a.tar.gz").exists()


def test_the_command_line_round_trip(filled_cache, keys, tmp_path):
    archive = tmp_path / "kernels.tar.gz"
    private, public = keys["ours"]

    def run(*argv, cache):
        return subprocess.run(
            [sys.executable, "-P", "-m", "mirage_jax", "cache", *argv],
            env=cli_env(cache),
            capture_output=True,
            text=True,
            timeout=300,
        )

    done = run("export", str(archive), "--sign", str(private), cache=filled_cache)
    assert done.returncode == 0, done.stdout + done.stderr
    target = tmp_path / "target"
    done = run("import", str(archive), cache=target)
    assert done.returncode == 1 and "no public key was given" in done.stdout
    done = run("import", str(archive), "--verify", str(public), cache=target)
    assert done.returncode == 0, done.stdout + done.stderr
    assert exported_files(target) == exported_files(filled_cache)

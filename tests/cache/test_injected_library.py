"""The attack: a publisher's archive, its kernel.so swapped for a library whose constructor
runs the attacker's code (the handler still works, so nothing looks wrong), every checksum
that covers it rewritten to match. It must be refused unsigned, refused with the original
(now wrong) signature, refused when signed by another key, and its constructor must never
run in the importing process; imported on the user's explicit trust, it runs only in the
probe's child process."""

import json
import os

import pytest
from cache_test_support import (
    SYMBOLS,
    build_library,
    entry_keys,
    filled_cache,
    handler_source,
    injected_source,
    keys,
    markers,
    read_members,
    sha256,
    tamper,
    template_cache,
)

from mirage_jax.cache import archive as cache_archive
from mirage_jax.cli.main import main
from mirage_jax.runtime import ffi_targets, kernel_cache, toolchain

_ = (filled_cache, keys, template_cache)


@pytest.fixture
def attack(filled_cache, keys, tmp_path):
    """(the signed archive, a function making the attacker's version of it, the key of the
    entry attacked, its symbol, the marker directory)."""
    archive = cache_archive.export_cache(
        tmp_path / "published.tar.gz", filled_cache, sign_with=keys["ours"][0]
    ).archive
    marker_dir = tmp_path / "markers"
    marker_dir.mkdir()
    symbol = SYMBOLS[0]
    key = next(
        k
        for k in entry_keys(filled_cache, "kernels")
        if json.loads((filled_cache / "kernels" / k / "meta.json").read_text())["symbol"] == symbol
    )
    evil = build_library(injected_source(symbol, marker_dir), tmp_path / "evil.so").read_bytes()
    prefix = f"kernels/{key}/"
    members = {m.name: d for m, d in read_members(archive)}
    meta = json.loads(members[prefix + "meta.json"])
    meta["library_sha256"] = sha256(evil)
    meta_bytes = json.dumps(meta, indent=1).encode()

    def consistent(doc):
        for e in doc["entries"]:
            if e["key"] == key:
                e["files"]["kernel.so"] = {"sha256": sha256(evil), "size": len(evil)}
                e["files"]["meta.json"] = {"sha256": sha256(meta_bytes), "size": len(meta_bytes)}
                e["binds"]["library_sha256"] = sha256(evil)

    def make(name, **how):
        return tamper(
            archive,
            tmp_path / name,
            replace={prefix + "kernel.so": evil, prefix + "meta.json": meta_bytes},
            manifest=consistent,
            **how,
        )

    return archive, make, key, symbol, marker_dir


def cli(monkeypatch, capsys, root, *argv):
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(root))
    status = main(["cache", *map(str, argv)])
    return status, capsys.readouterr().out


def test_the_injected_library_is_refused_unsigned_and_with_a_bad_signature(
    attack, keys, tmp_path, monkeypatch, capsys
):
    _, make, key, _, marker_dir = attack
    public = keys["ours"][1]
    target = tmp_path / "target"
    cases = [
        (make("unsigned.tar.gz", signature="drop"), (), "is not signed: refusing to import"),
        (make("unsigned2.tar.gz", signature="drop"), ("--verify", public), "is not signed"),
        (
            make("kept.tar.gz", signature="keep"),
            ("--verify", public),
            "its signature does not verify with",
        ),
        (
            make("resigned.tar.gz", signature="resign", sign_with=keys["theirs"][0]),
            ("--verify", public),
            "is signed by key ",
        ),
    ]
    for archive, options, why in cases:
        status, out = cli(monkeypatch, capsys, target, "import", str(archive), *options)
        assert status == 1 and why in out, out
        assert len(out.strip().splitlines()) == 1, out
        assert not (target / "kernels" / key).exists()
        assert markers(marker_dir) == [], "the injected constructor ran"


def test_trusted_unsigned_it_runs_only_in_the_probe_process(attack, tmp_path, monkeypatch, capsys):
    """On the user's explicit trust the entry is imported (it loads and exports its
    handler); loading it in the probe's child ran the constructor there, never here."""
    _, make, key, symbol, marker_dir = attack
    target = tmp_path / "target"
    archive = make("unsigned.tar.gz", signature="drop")
    status, out = cli(monkeypatch, capsys, target, "import", str(archive), "--trust-unsigned")
    assert status == 0, out
    assert "warning: imported without checking a signature" in out
    ran = markers(marker_dir)
    assert ran and f"ran-in-{os.getpid()}" not in ran
    assert (target / "kernels" / key / "kernel.so").exists()
    assert not ffi_targets.is_registered(symbol)


def test_the_published_archive_imports_and_serves_without_compiling(
    attack, keys, tmp_path, monkeypatch, capsys
):
    archive, _, key, symbol, marker_dir = attack
    target = tmp_path / "target"
    status, out = cli(
        monkeypatch, capsys, target, "import", str(archive), "--verify", keys["ours"][1]
    )
    assert status == 0 and "imported 3 entries" in out, out
    assert markers(marker_dir) == []

    def no_compiler(source, library, include=None):
        raise AssertionError("compiled though the archive holds the library")

    monkeypatch.setattr(toolchain, "compile_cpu_library", no_compiler)
    library = kernel_cache.library_for(handler_source(symbol), symbol=symbol)
    assert library == target / "kernels" / key / "kernel.so"

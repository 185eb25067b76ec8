"""Signed archives: cache keygen, export --sign, import --verify. An archive is imported only
when its manifest carries a valid signature by the given key, or when the user passes
--trust-unsigned (with a warning); the error names the missing extra when `cryptography` is
not installed."""

import os
import stat

import pytest
from cache_test_support import (
    entry_keys,
    exported_files,
    filled_cache,
    keys,
    tamper,
    template_cache,
)

from mirage_jax.cache import archive as cache_archive
from mirage_jax.cache import signing
from mirage_jax.cli.main import main

_ = (filled_cache, keys, template_cache)


def cli(monkeypatch, capsys, root, *argv):
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(root))
    status = main(["cache", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_keygen_writes_a_private_key_only_its_owner_reads(tmp_path, monkeypatch, capsys):
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    status, out = cli(monkeypatch, capsys, tmp_path, "keygen", str(private), str(public))
    assert status == 0 and "keep it secret" in out, out
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in private.read_bytes() and b"PUBLIC KEY" in public.read_bytes()
    before = private.read_bytes()
    status, out = cli(monkeypatch, capsys, tmp_path, "keygen", str(private), str(public))
    assert status == 1 and f"{private} exists; not overwriting it" in out
    assert private.read_bytes() == before


def test_a_signature_verifies_only_with_its_key_and_only_for_its_manifest(keys):
    (private, public), (_, other) = keys["ours"], keys["theirs"]
    manifest = b'{"format": 2}'
    signature = signing.sign(manifest, private)
    assert signing.verify(manifest, signature, public) == signing.signer_of(signature)[0]
    with pytest.raises(signing.SigningError, match="does not verify"):
        signing.verify(manifest + b" ", signature, public)
    with pytest.raises(signing.SigningError, match=r"is signed by key .*, not by"):
        signing.verify(manifest, signature, other)
    with pytest.raises(signing.SigningError, match="not an unencrypted PEM private key"):
        signing.sign(manifest, public)
    with pytest.raises(signing.SigningError, match="not a PEM public key"):
        signing.verify(manifest, signature, private)


def test_an_unsigned_archive_is_refused_unless_trusted_and_then_warns(
    filled_cache, tmp_path, monkeypatch, capsys
):
    archive = cache_archive.export_cache(tmp_path / "a.tar.gz", filled_cache).archive
    target = tmp_path / "target"
    status, out = cli(monkeypatch, capsys, target, "import", str(archive))
    assert status == 1
    assert out.startswith(f"cache import: {archive} is not signed: refusing to import")
    assert "--trust-unsigned" in out and "--sign" in out
    assert not target.exists() or exported_files(target) == {}

    status, out = cli(monkeypatch, capsys, target, "import", str(archive), "--trust-unsigned")
    assert status == 0, out
    assert "warning: imported without checking a signature (--trust-unsigned)" in out
    assert exported_files(target) == exported_files(filled_cache)
    status, out = cli(monkeypatch, capsys, target, "verify")
    assert out.count("unsigned (--trust-unsigned)") == 3, out


def test_verify_refuses_an_unsigned_archive(filled_cache, keys, tmp_path, monkeypatch, capsys):
    archive = cache_archive.export_cache(tmp_path / "a.tar.gz", filled_cache).archive
    target = tmp_path / "target"
    status, out = cli(
        monkeypatch, capsys, target, "import", str(archive), "--verify", keys["ours"][1]
    )
    assert status == 1
    assert "is not signed, and a public key was given to verify it: refusing it" in out


def test_a_signed_archive_needs_the_key_to_be_named(
    filled_cache, keys, tmp_path, monkeypatch, capsys
):
    archive = cache_archive.export_cache(
        tmp_path / "a.tar.gz", filled_cache, sign_with=keys["ours"][0]
    ).archive
    status, out = cli(monkeypatch, capsys, tmp_path / "target", "import", str(archive))
    assert status == 1 and "is signed (by key " in out and "--verify PUBLIC_KEY" in out


def test_an_altered_manifest_or_another_signer_is_refused(
    filled_cache, keys, tmp_path, monkeypatch, capsys
):
    (private, public), (their_private, _) = keys["ours"], keys["theirs"]
    archive = cache_archive.export_cache(tmp_path / "a.tar.gz", filled_cache, sign_with=private)
    key = entry_keys(filled_cache, "kernels")[0]

    def drop_entry(doc):
        doc["entries"] = [e for e in doc["entries"] if e["key"] != key]

    target = tmp_path / "target"
    altered = tamper(archive.archive, tmp_path / "altered.tar.gz", manifest=drop_entry)
    status, out = cli(monkeypatch, capsys, target, "import", str(altered), "--verify", public)
    assert status == 1 and "its signature does not verify with" in out, out
    resigned = tamper(
        archive.archive,
        tmp_path / "resigned.tar.gz",
        manifest=drop_entry,
        signature="resign",
        sign_with=their_private,
    )
    status, out = cli(monkeypatch, capsys, target, "import", str(resigned), "--verify", public)
    assert status == 1 and "is signed by key " in out and f"not by {public}" in out, out
    assert not target.exists() or exported_files(target) == {}


def test_without_cryptography_the_error_names_the_extra(
    filled_cache, keys, tmp_path, monkeypatch, capsys
):
    signed = cache_archive.export_cache(
        tmp_path / "s.tar.gz", filled_cache, sign_with=keys["ours"][0]
    ).archive
    monkeypatch.setattr(signing, "_MISSING", ImportError("No module named 'cryptography'"))
    archive, target = tmp_path / "a.tar.gz", tmp_path / "target"
    for root, argv in (
        (filled_cache, ("export", str(archive), "--sign", str(keys["ours"][0]))),
        (filled_cache, ("keygen", str(tmp_path / "k"), str(tmp_path / "k.pub"))),
        (target, ("import", str(signed), "--verify", str(keys["ours"][1]))),
    ):
        status, out = cli(monkeypatch, capsys, root, *argv)
        assert status == 1, out
        assert "needs the 'cryptography' package" in out and "mirage_jax[sign]" in out, out
    assert not archive.exists() and not os.path.exists(tmp_path / "k")
    assert not target.exists() or exported_files(target) == {}

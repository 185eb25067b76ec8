"""Ed25519 signatures over a cache archive's manifest (python -m mirage_jax cache keygen,
export --sign, import --verify), with the `cryptography` library: install mirage_jax's
`sign` extra.

The signature covers the manifest's exact bytes, and the manifest records the sha256 and
size of every file of every entry and, for a kernel library, the sha256 of the source it was
built from and its cache key: a valid signature says the holder of the private key vouches
for every byte the import writes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    _MISSING: ImportError | None = None
except ImportError as e:  # the optional `sign` extra is not installed
    _MISSING = e

ALGORITHM = "ed25519"
# Signed before the manifest's bytes, so that a signature made for anything else never
# verifies as a manifest's.
_CONTEXT = b"mirage_jax cache archive manifest\0"
# A signature document is a few hundred bytes.
MAX_SIGNATURE_BYTES = 4096


class SigningError(Exception):
    """A key or a signature cannot be used; the message says why."""


def _need_cryptography() -> None:
    if _MISSING is not None:
        raise SigningError(
            "signing and verifying cache archives needs the 'cryptography' package, which is "
            "not installed: install mirage_jax with its 'sign' extra "
            f"(pip install 'mirage_jax[sign]'; {_MISSING})"
        )


def fingerprint(public_raw: bytes) -> str:
    """A short name of a public key: the start of the sha256 of its 32 raw bytes."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


def _raw(public_key: ed25519.Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def generate_keys(private_path: Path, public_path: Path) -> str:
    """Writes a new Ed25519 key pair as PEM: the private key readable by its owner only.
    Refuses to overwrite either file. Returns the public key's fingerprint."""
    _need_cryptography()
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise SigningError(f"{path} exists; not overwriting it")
    private = ed25519.Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    handle = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(handle, "wb") as f:
        f.write(private_pem)
    public_path.write_bytes(public_pem)
    return fingerprint(_raw(private.public_key()))


def _read_key_file(path: Path, what: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SigningError(f"cannot read the {what} {path} ({e.strerror or e})") from None
    if len(data) > 64 * 1024:
        raise SigningError(f"{path} is not a {what} (it is {len(data)} bytes)")
    return data


def _private_key(path: Path) -> ed25519.Ed25519PrivateKey:
    data = _read_key_file(path, "private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise SigningError(
            f"{path} is not an unencrypted PEM private key (make one with "
            f"`python -m mirage_jax cache keygen`): {e}"
        ) from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SigningError(f"{path} holds a {type(key).__name__}, not an Ed25519 private key")
    return key


def _public_key(path: Path) -> ed25519.Ed25519PublicKey:
    data = _read_key_file(path, "public key")
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as e:
        raise SigningError(
            f"{path} is not a PEM public key (the .pub file `cache keygen` wrote): {e}"
        ) from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise SigningError(f"{path} holds a {type(key).__name__}, not an Ed25519 public key")
    return key


def sign(manifest: bytes, private_path: Path) -> bytes:
    """The signature document of `manifest` (stored next to it in the archive)."""
    _need_cryptography()
    key = _private_key(private_path)
    doc = {
        "algorithm": ALGORITHM,
        "key": fingerprint(_raw(key.public_key())),
        "signature": base64.b64encode(key.sign(_CONTEXT + manifest)).decode(),
    }
    return json.dumps(doc, indent=1).encode()


def signer_of(signature: bytes) -> tuple[str, bytes]:
    """(the signing key's fingerprint as the document states it, the raw signature), or
    SigningError when the document is malformed."""
    try:
        doc = json.loads(signature)
    except ValueError:
        raise SigningError("the signature is not a JSON document") from None
    if not isinstance(doc, dict) or doc.get("algorithm") != ALGORITHM:
        found = doc.get("algorithm") if isinstance(doc, dict) else None
        raise SigningError(f"the signature's algorithm is {found!r}, not {ALGORITHM!r}")
    key, raw = doc.get("key"), doc.get("signature")
    if not isinstance(key, str) or not isinstance(raw, str):
        raise SigningError("the signature lacks its 'key' or 'signature' text")
    try:
        return key, base64.b64decode(raw, validate=True)
    except ValueError:
        raise SigningError("the signature is not base64") from None


def verify(manifest: bytes, signature: bytes, public_path: Path) -> str:
    """The fingerprint of the key in `public_path` when `signature` is its signature of
    `manifest`; SigningError naming the problem otherwise."""
    _need_cryptography()
    key = _public_key(public_path)
    ours = fingerprint(_raw(key))
    theirs, raw = signer_of(signature)
    if theirs != ours:
        raise SigningError(f"it is signed by key {theirs}, not by {public_path} (key {ours})")
    try:
        key.verify(raw, _CONTEXT + manifest)
    except InvalidSignature:
        raise SigningError(
            f"its signature does not verify with {public_path} (key {ours}): the manifest "
            f"was altered after signing, or the signature was forged"
        ) from None
    return ours

"""python -m mirage_jax cache {list,verify,clear,export,import,keygen}: the printing side of
mirage_jax/cache/ (admin.py, archive.py, signing.py)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

# Importing the kernel, search and verdict caches registers their kinds of entries with the store,
# which is how the admin functions know them.
import mirage_jax.rewrite.estimate_cache
import mirage_jax.runtime.kernel_cache
import mirage_jax.superopt.search_cache  # noqa: F401
from mirage_jax.cache import admin as cache_admin
from mirage_jax.cache import archive as cache_archive
from mirage_jax.cache import signing
from mirage_jax.cache import store as cache
from mirage_jax.superopt import verdict_cache

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """ "512M", "8G", "1000000" -> bytes (powers of 1024)."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 512M, 8G or 1000000")
    number, unit = found.groups()
    power = "KMGT".index(unit.upper()) + 1 if unit else 0
    return int(float(number) * 1024**power)


def add_parser(commands) -> None:
    """The `cache` command and its actions, on the subparsers `commands`."""
    cache_command = commands.add_parser(
        "cache", help="list, verify, clear, export or import the search and kernel caches"
    )
    actions = cache_command.add_subparsers(dest="action", required=True)
    actions.add_parser(
        "list",
        help="each entry's kind (search/kernel/verdict), key, size and age, and each "
        "verdict's choice, ratio with its interval, rounds and when it was measured",
    )
    actions.add_parser(
        "verify",
        help="re-check every entry (checksums, source against key, each library loaded in a "
        "separate process) and remove the bad ones (exit status 1 when there were any)",
    )
    clear = actions.add_parser(
        "clear",
        help="remove every entry (only with --yes; without it, print what would be removed)",
    )
    clear.add_argument("--yes", action="store_true", help="really remove them")
    export = actions.add_parser(
        "export", help="write every sound entry to a .tar.gz archive (to deploy on another machine)"
    )
    export.add_argument("path", help="the archive to write")
    export.add_argument(
        "--sign",
        metavar="PRIVATE_KEY",
        type=Path,
        help="sign the archive's manifest with this Ed25519 private key (from `cache keygen`)",
    )
    import_ = actions.add_parser(
        "import",
        help="add the entries of an exported archive after checking its signature, every "
        "file and every library; refuses what fails",
    )
    import_.add_argument("path", help="the archive to read")
    trust = import_.add_mutually_exclusive_group()
    trust.add_argument(
        "--verify",
        metavar="PUBLIC_KEY",
        type=Path,
        help="the public key the archive must be signed with (the .pub of `cache keygen`)",
    )
    trust.add_argument(
        "--trust-unsigned",
        action="store_true",
        help="import without checking a signature (only archives you made yourself): the "
        "libraries in it will be run by programs using this cache",
    )
    import_.add_argument(
        "--max-size",
        type=parse_size,
        default=cache_archive.DEFAULT_MAX_BYTES,
        metavar="SIZE",
        help="refuse an archive whose files add up to more than this "
        f"(default {cache_admin.human_size(cache_archive.DEFAULT_MAX_BYTES)}; e.g. 512M, 20G)",
    )
    keygen = actions.add_parser(
        "keygen", help="write a new Ed25519 key pair for signing archives (export --sign)"
    )
    keygen.add_argument("private", type=Path, help="the private key to write (kept secret)")
    keygen.add_argument("public", type=Path, help="the public key to write (for import --verify)")


def run(args: argparse.Namespace) -> int:
    root = cache.cache_root()
    action = args.action
    if action == "list":
        return _list(root)
    if action == "verify":
        return _verify(root)
    if action == "clear":
        return _clear(root, args.yes)
    if action == "export":
        return _export(root, args.path, args.sign)
    if action == "import":
        return _import(root, args.path, args.verify, args.trust_unsigned, args.max_size)
    if action == "keygen":
        return _keygen(args.private, args.public)
    raise ValueError(f"cache: unknown action {action!r}")


def _list(root) -> int:
    found = list(cache_admin.entries(root))
    print(
        f"cache {root}: {len(found)} entries, {cache_admin.human_size(sum(e.size for e in found))}"
    )
    if found:
        print(f"  {'kind':<7} {'key':<32} {'size':>10} {'age':>5}")
    for e in found:
        print(
            f"  {e.kind:<7} {e.key:<32} {cache_admin.human_size(e.size):>10} "
            f"{cache_admin.human_age(e.age_s):>5}"
        )
    verdicts = [e for e in found if e.kind == verdict_cache.KIND]
    if verdicts:
        print("verdicts (scope, label, choice, XLA/chosen ratio [interval], rounds, measured):")
    for e in verdicts:
        line = verdict_cache.summary(e.path)
        print(f"  {line}" if line is not None else f"  (unreadable: {e.key})")
    return 0


def _verify(root) -> int:
    found = list(cache_admin.entries(root))
    problems = cache_admin.problems(
        ((cache.KINDS[e.kind], e.path) for e in found), fresh_probe=True
    )
    bad = 0
    for e, problem in zip(found, problems):
        if problem is None:
            print(f"  ok   {e.kind:<7} {e.key}  ({e.origin()})")
            continue
        bad += 1
        # A process may have the library loaded; removing the directory leaves its mapping
        # intact, and the next lookup rebuilds the entry.
        cache.remove_entry(e.path)
        print(f"  BAD  {e.kind:<7} {e.key}: {problem}; removed")
    print(
        f"cache {root}: {len(found)} entries checked, {bad} bad"
        + (" (removed; they are rebuilt when next needed)" if bad else "")
    )
    if found:
        print(
            "checked: every file against its checksum, every kernel's source against its key, "
            "every kernel library loaded in a separate process with its handler found. Not "
            "checked: what a library's code does; only a signature (import --verify) says who "
            "built an imported one"
        )
    return 1 if bad else 0


def _clear(root, yes: bool) -> int:
    directories = cache_admin.cache_directories(root)
    found = list(cache_admin.entries(root))
    total = cache_admin.human_size(sum(e.size for e in found))
    if not yes:
        print(f"cache {root}: would remove {len(found)} entries ({total}):")
        for e in found:
            print(f"  {e.kind:<7} {e.key}")
        print(f"by removing {', '.join(str(d) for d in directories) or 'nothing'}")
        print("nothing removed; run again with --yes to remove them")
        return 0
    for d in directories:
        cache.remove_entry(d)
    print(f"cache {root}: removed {len(found)} entries ({total})")
    return 0


def _export(root, path, sign: Path | None) -> int:
    try:
        done = cache_archive.export_cache(path, root, sign_with=sign)
    except (cache_archive.CacheArchiveError, signing.SigningError) as e:
        print(f"cache export: {e}")
        return 1
    except OSError as e:
        print(f"cache export: cannot write {path}: {e}")
        return 1
    for kind, key, problem in done.skipped:
        print(f"  skipped  {kind:<7} {key}: bad ({problem})")
    for kind, key in done.done:
        print(f"  exported {kind:<7} {key}")
    print(
        f"cache {root}: exported {len(done.done)} entries to {done.archive} "
        f"({cache_admin.human_size(done.size)}), "
        + (f"signed by key {done.signer}" if done.signer else "unsigned")
        + (f"; {len(done.skipped)} bad entries left out" if done.skipped else "")
    )
    if not done.signer:
        print(
            "note: an unsigned archive is imported only with --trust-unsigned; sign it with "
            "--sign PRIVATE_KEY (make a key pair with `cache keygen`)"
        )
    return 0


def _import(root, path, verify: Path | None, trust_unsigned: bool, max_size: int) -> int:
    try:
        done = cache_archive.import_cache(
            path, root, verify_with=verify, trust_unsigned=trust_unsigned, max_bytes=max_size
        )
    except cache_archive.CacheArchiveError as e:
        print(f"cache import: {e}")
        return 1
    except OSError as e:
        print(f"cache import: cannot write to the cache {root}: {e}")
        return 1
    if done.signer:
        print(f"signature: good, key {done.signer}")
    for kind, key in done.done:
        print(f"  imported {kind:<7} {key}")
    for kind, key in done.present:
        print(f"  present  {kind:<7} {key}")
    for kind, key, why in done.refused:
        print(f"  REFUSED  {kind:<7} {key}: {why}")
    for note in done.notes:
        print(f"warning: {note}")
    print(
        f"cache {root}: imported {len(done.done)} entries from {done.archive} "
        f"({cache_admin.human_size(done.size)}), {len(done.present)} already present, "
        f"{len(done.refused)} refused"
        + (" (nothing of a refused entry was written)" if done.refused else "")
    )
    return 1 if done.refused else 0


def _keygen(private: Path, public: Path) -> int:
    try:
        fingerprint = signing.generate_keys(private, public)
    except signing.SigningError as e:
        print(f"cache keygen: {e}")
        return 1
    except OSError as e:
        print(f"cache keygen: cannot write the keys: {e}")
        return 1
    print(
        f"wrote the private key {private} (keep it secret; `cache export --sign {private}`) "
        f"and the public key {public} (`cache import --verify {public}`); key {fingerprint}"
    )
    return 0

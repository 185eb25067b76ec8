"""The on-disk cache of compiled kernel libraries, one directory per backend
(mirage_jax/runtime/backends.py) in the shared store (mirage_jax/cache/store.py).

An entry is a directory named by the key (a hash of the source and of what the backend's key
covers: compiler, flags, target architectures, for CUDA also the PTX embedded, the toolkit
and the minimum driver it implies; and the mirage_jax and jaxlib versions)
holding the source, the library and meta.json, which records the sha256 of both, the
handler's symbol, and what the key was computed from. An entry is used only when all of it
agrees: its files match their checksums, its key is the hash of its own source and
build record, it holds the handler asked for, and its library has passed the probe
(mirage_jax/runtime/library_probe.py: loaded by a separate process first). Anything else
about an entry (a file where its directory should be, garbage with a matching checksum, a
library that crashes its loader) gets it deleted and rebuilt from source, with one warning.

A serving machine may have no nvcc (a cache exported from a build machine): it cannot know
the toolkit's version, so it takes the sound entry of this source built with everything else
as here by the newest toolkit whose minimum driver this machine's driver meets. None there:
KernelCompileError saying what to ship.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import warnings
from pathlib import Path
from typing import Any

from mirage_jax.cache import store
from mirage_jax.runtime import library_probe, toolchain
from mirage_jax.runtime.backends import BACKENDS, CPU, Backend
from mirage_jax.runtime.library_probe import KernelLoadError
from mirage_jax.runtime.toolchain import KernelCompileError

LIBRARY = "kernel.so"
META = "meta.json"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_KEYED_FIRST = ("compiler", "flags", "archs")
# What a library built elsewhere may differ in from one built here (kernels shipped to a
# machine without nvcc).
_TOOLKIT_FIELDS = ("toolkit", "min_driver")


def _key(source: str, built_with: dict[str, Any], versions: dict[str, str]) -> str:
    h = hashlib.sha256()
    # In the order of the key's first version (source, compiler, flags, archs, versions), so
    # that caches filled before backends were records stay valid.
    parts = [source, built_with["compiler"], *built_with["flags"], *built_with.get("archs", ())]
    # Whatever else a backend records (CUDA: the PTX embedded, the toolkit and the minimum
    # driver it implies).
    parts += sorted(f"{k}={v}" for k, v in built_with.items() if k not in _KEYED_FIRST)
    parts += sorted(f"{k}={v}" for k, v in versions.items())
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def library_key(source: str, backend: Backend = CPU, options: dict[str, Any] | None = None) -> str:
    """The cache key of the library built from `source` with the backend's current setup."""
    options = backend.options() if options is None else options
    return _key(source, backend.built_with(options), store.versions())


def _is_text_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _meta_problem(meta: object, backend: Backend, key: str) -> str | None:
    """What is wrong with the shape of a meta.json, else None."""
    if not isinstance(meta, dict):
        return "is not a JSON object"
    for name in ("library_sha256", "source_sha256"):
        if not (isinstance(meta.get(name), str) and _HEX64.fullmatch(meta[name])):
            return f"records no {name.replace('_', ' ')} (an entry of an older mirage_jax?)"
    if not (isinstance(meta.get("symbol"), str) and meta["symbol"]):
        return "records no handler symbol"
    if meta.get("kind") != backend.cache_kind or meta.get("key") != key:
        return f"names another entry ({meta.get('kind')!r} {meta.get('key')!r})"
    built_with, versions = meta.get("built_with"), meta.get("versions")
    if not (
        isinstance(built_with, dict)
        and isinstance(built_with.get("compiler"), str)
        and _is_text_list(built_with.get("flags"))
        and _is_text_list(built_with.get("archs", []))
    ):
        return "does not record the compiler and flags"
    if not (isinstance(versions, dict) and all(isinstance(v, str) for v in versions.values())):
        return "does not record the versions"
    return None


def _regular_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _read_meta(entry: Path) -> dict[str, Any]:
    return json.loads((entry / META).read_text())


def entry_problem(entry: Path, backend: Backend = CPU) -> str | None:
    """None when `entry`'s files agree with each other and with its key, else what is wrong.
    Loads nothing (library_problem probes the library)."""
    if entry.is_symlink() or not entry.is_dir():
        return "it is not a directory"
    for name in (META, backend.source_name, LIBRARY):
        if not _regular_file(entry / name):
            return f"its {name} is missing or not a regular file"
    try:
        meta = _read_meta(entry)
        source = (entry / backend.source_name).read_bytes()
        library_sha256 = store.sha256_of(entry / LIBRARY)
    except (OSError, ValueError) as e:
        return f"it is unreadable ({e})"
    problem = _meta_problem(meta, backend, entry.name)
    if problem is not None:
        return f"its {META} {problem}"
    if hashlib.sha256(source).hexdigest() != meta["source_sha256"]:
        return "its source does not match the recorded checksum"
    if library_sha256 != meta["library_sha256"]:
        return "its library does not match the recorded checksum"
    try:
        key = _key(source.decode(), meta["built_with"], meta["versions"])
    except UnicodeDecodeError:
        return "its source is not text"
    if key != entry.name:
        return "its key is not the hash of its source, compiler, flags and versions"
    return None


def library_problem(entry: Path, fresh: bool = False, backend: Backend = CPU) -> str | None:
    """None when the library of a sound entry (entry_problem) has passed the probe (from the
    record of its bytes unless `fresh`), else what is wrong."""
    meta = _read_meta(entry)
    return library_probe.ensure_probed(
        entry / LIBRARY, meta["symbol"], meta["library_sha256"], fresh=fresh
    )


def binding(entry: Path) -> dict[str, str]:
    """What a signed archive vouches for besides the files' hashes: this library was built
    from this source (the key hashes the source) and holds this handler."""
    meta = _read_meta(entry)
    return {name: meta[name] for name in ("source_sha256", "library_sha256", "symbol")}


for _backend in BACKENDS.values():
    store.register_kind(
        _backend.cache_kind,
        _backend.cache_directory,
        functools.partial(entry_problem, backend=_backend),
        files=frozenset({META, LIBRARY, _backend.source_name}),
        probe=functools.partial(library_problem, backend=_backend),
        binding=binding,
    )


def _build_entry(
    parent: Path, key: str, source: str, symbol: str, backend: Backend, options: dict[str, Any]
) -> None:
    with store.staged_entry(parent, key) as staging:
        (staging / backend.source_name).write_text(source)
        backend.build(staging / backend.source_name, staging / LIBRARY, options)
        meta = {
            "kind": backend.cache_kind,
            "key": key,
            "symbol": symbol,
            "library_sha256": store.sha256_of(staging / LIBRARY),
            "source_sha256": store.sha256_of(staging / backend.source_name),
            "built_with": backend.built_with(options),
            "versions": store.versions(),
        }
        (staging / META).write_text(json.dumps(meta, indent=1))
        store.record_origin(staging, origin="compiled here")


def _unusable(entry: Path, source: str, symbol: str, backend: Backend) -> str | None:
    """None when `entry` can be loaded as `symbol` built from `source`, else why not."""
    problem = entry_problem(entry, backend)
    if problem is not None:
        return problem
    if (entry / backend.source_name).read_text() != source:
        return "its source is not this kernel's"
    found = _read_meta(entry)["symbol"]
    if found != symbol:
        return f"it holds the handler {found!r}, not {symbol!r}"
    return library_problem(entry, backend=backend)


def _toolkit_order(toolkit: object) -> tuple[int, ...]:
    return tuple(int(p) for p in str(toolkit).split(".") if p.isdigit())


def _prebuilt(
    parent: Path, source: str, symbol: str, backend: Backend, options: dict[str, Any]
) -> Path:
    """Without the backend's compiler: the library of `source` (handler `symbol`) that another
    machine built with everything but the toolkit as here, by the newest toolkit whose
    minimum driver this machine's driver meets; KernelCompileError naming what is missing."""
    wanted = {k: v for k, v in backend.built_with(options).items() if k not in _TOOLKIT_FIELDS}
    driver = toolchain.driver_cuda_version()
    found: list[tuple[tuple[int, ...], Path]] = []
    too_new: list[str] = []
    for meta_path in sorted(parent.glob(f"*/{META}")):
        entry = meta_path.parent
        try:
            if entry_problem(entry, backend) is not None:
                continue
            meta = _read_meta(entry)
            built_with = meta["built_with"]
            same = {k: v for k, v in built_with.items() if k not in _TOOLKIT_FIELDS} == wanted
            if not (
                same
                and meta["symbol"] == symbol
                and meta["versions"] == store.versions()
                and (entry / backend.source_name).read_text() == source
            ):
                continue
        except (OSError, ValueError):
            continue
        min_driver = built_with.get("min_driver")
        if driver is not None and isinstance(min_driver, int) and min_driver > driver:
            too_new.append(str(built_with.get("toolkit", "?")))
            continue
        found.append((_toolkit_order(built_with.get("toolkit")), entry))
    for _, entry in sorted(found, reverse=True):
        if library_problem(entry, backend=backend) is None:
            return entry / LIBRARY
    if too_new and driver is not None:
        raise KernelCompileError(
            f"the cached kernel was built by CUDA {', '.join(sorted(set(too_new)))}, which "
            f"needs a newer driver than this machine's (CUDA "
            f"{driver // 1000}.{driver % 1000 // 10}); and there is no nvcc here to rebuild it"
        )
    raise KernelCompileError(
        f"no nvcc here and no prebuilt kernel for this program in {parent}: build it where "
        f"the CUDA toolkit is installed and ship it with `python -m mirage_jax cache export` "
        f"/ `cache import` (for architectures {','.join(options.get('archs', ()))})"
    )


def library_for(
    source: str,
    backend: Backend = CPU,
    options: dict[str, Any] | None = None,
    *,
    symbol: str,
) -> Path:
    """The path of the compiled library of `source`, whose FFI handler is `symbol`, for
    `backend`, compiling it on a miss; the library has passed the probe. `options`: the
    backend's options of this compilation (default: its current ones).

    A bad entry is deleted and rebuilt with one RuntimeWarning; KernelCompileError or
    KernelLoadError when no sound library can be had (the caller runs the region as XLA).
    Without the compiler (a backend whose toolkit is None), a library built elsewhere
    (_prebuilt)."""
    options = backend.options() if options is None else options
    parent = store.cache_root() / backend.cache_directory
    built_with = backend.built_with(options)
    if "toolkit" in built_with and built_with["toolkit"] is None:
        return _prebuilt(parent, source, symbol, backend, options)
    key = _key(source, built_with, store.versions())
    entry = parent / key
    try:
        if entry.exists() and _unusable(entry, source, symbol, backend) is None:
            return entry / LIBRARY
    except (OSError, ValueError):
        pass  # changed under us: decided again under the lock
    store.ensure_directory(parent)
    with store.locked(parent / ".locks" / f"{key}.lock"):
        # Another process may have built (or repaired) it while we waited for the lock.
        bad = None
        if entry.exists() or entry.is_symlink():
            try:
                bad = _unusable(entry, source, symbol, backend)
            except (OSError, ValueError) as e:
                bad = f"it is unreadable ({e})"
            if bad is None:
                return entry / LIBRARY
            store.remove_entry(entry)
        was = f" (the cached one was bad: {bad})" if bad else ""
        try:
            _build_entry(parent, key, source, symbol, backend, options)
        except KernelCompileError as e:
            raise KernelCompileError(f"{e}{was}") from None
        problem = _unusable(entry, source, symbol, backend)
        if problem is not None:
            store.remove_entry(entry)
            raise KernelLoadError(
                f"the {backend.name} kernel library built for {symbol} is unusable: {problem}{was}"
            )
    if bad is not None:
        warnings.warn(
            f"mirage_jax: cached {backend.name} kernel library {entry} was bad ({bad}); "
            f"deleted it and rebuilt it from source",
            RuntimeWarning,
            stacklevel=2,
        )
    return entry / LIBRARY

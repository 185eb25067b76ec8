"""Persisted decisions: which program won the timing (a region's candidate or XLA, the
rewritten program or jax.jit), one kind of entry of the shared store
(mirage_jax/cache/store.py).

Timing is noisy, and a decision taken again in every process can come out differently from
one process to the next. A verdict measured once is kept with its evidence (the ratio, its
interval, the rounds, the medians, what was checked) and the machine it was measured on;
another process on the same machine with the same cache loads it and decides the same way
without timing. The key holds the machine's fingerprint (CPU model, cores, the versions of
jax, jaxlib and mirage_jax, the core's digest, the device), so a verdict never crosses to
another machine or version. A loaded verdict only names the choice: whoever loads it still
proves a chosen graph equivalent before running it (superoptimize re-verifies it).

An entry is a directory verdicts/<key>/ holding verdict.json and meta.json (its sha256).
$MIRAGE_JAX_VERDICTS=0 turns verdicts off: every call times afresh and stores nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import platform
import warnings
from pathlib import Path
from typing import Any

import jax

from mirage_jax.cache import store as cache
from mirage_jax.superopt import search_cache  # noqa: F401 (registers the core's fingerprint)
from mirage_jax.superopt.machine import cpu_model, host, now

KIND = "verdict"
DIRECTORY = "verdicts"
_VERDICT = "verdict.json"
_META = "meta.json"
ENV = "MIRAGE_JAX_VERDICTS"
_CONFIG_FIELDS_NOT_IN_KEY = ("threads",)


def enabled() -> bool:
    """Whether verdicts are loaded and stored ($MIRAGE_JAX_VERDICTS=0 turns them off)."""
    return os.environ.get(ENV, "1") != "0"


@functools.lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    """What a timing depends on besides the programs: this machine and the software."""
    try:
        device = jax.devices()[0]
        device_kind = f"{device.platform}:{device.device_kind}"
    except RuntimeError as e:
        device_kind = f"none ({e})"
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "arch": platform.machine(),
        "device": device_kind,
        "jax": jax.__version__,
        **cache.versions(),
        **cache.fingerprints(),
    }


def _key(parts: dict[str, Any]) -> str:
    text = json.dumps({**parts, "machine": machine()}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def region_key(graph, config, backend: str, top_k: int, cold_caches: bool = False) -> str:
    """The key of superoptimize's verdict on `graph` (a KernelGraph), timed with warm or
    cold caches (a verdict of one says nothing of the other)."""
    fields = {
        k: v for k, v in dataclasses.asdict(config).items() if k not in _CONFIG_FIELDS_NOT_IN_KEY
    }
    doc = {
        "scope": "region",
        "graph": graph.hash(),
        "config": fields,
        "backend": backend,
        "top_k": top_k,
    }
    if cold_caches:  # absent otherwise: warm verdicts keep the keys they were stored under
        doc["timing"] = "cold caches"
    return _key(doc)


def program_key(rewritten_text: str, plain_text: str, signature: str) -> str:
    """The key of the whole-program verdict: the rewritten program (its kernels named by
    their generated symbols), the plain program's jaxpr, and the call signature."""
    digest = {
        name: hashlib.sha256(text.encode()).hexdigest()
        for name, text in (("rewritten", rewritten_text), ("plain", plain_text))
    }
    return _key({"scope": "program", **digest, "signature": signature})


def entry_problem(entry: Path) -> str | None:
    """None when `entry` holds a verdict matching its checksum and parsing as one, else
    what is wrong."""
    try:
        meta = json.loads((entry / _META).read_text())
        actual = cache.sha256_of(entry / _VERDICT)
        doc = json.loads((entry / _VERDICT).read_text())
    except (OSError, ValueError) as e:
        return f"unreadable ({e})"
    if meta.get("sha256") != actual:
        return "its verdict does not match the recorded checksum"
    if not isinstance(doc, dict) or not {"scope", "chosen", "ratio"} <= set(doc):
        return "it is not a verdict (scope, chosen, ratio missing)"
    return None


cache.register_kind(KIND, DIRECTORY, entry_problem, files=frozenset({_VERDICT, _META}))


def _entry(key: str) -> Path:
    return cache.cache_root() / DIRECTORY / key


@contextlib.contextmanager
def measuring(key: str):
    """Holds `key`'s lock while its verdict is looked up, measured and stored (load, reject
    and save expect it held): a second process deciding the same thing waits,
    then follows the first one's verdict, so processes running at once decide alike too."""
    if not enabled():
        yield
        return
    with cache.locked(cache.cache_root() / DIRECTORY / ".locks" / f"{key}.lock"):
        yield


def load(key: str) -> dict[str, Any] | None:
    """The verdict stored under `key` (its lock held), else None. A damaged entry is
    removed, with one warning, and None returned: the caller measures again."""
    if not enabled():
        return None
    entry = _entry(key)
    if not (entry.exists() or entry.is_symlink()):
        return None
    problem = entry_problem(entry)
    if problem is None:
        return json.loads((entry / _VERDICT).read_text())
    reject(key, problem)
    return None


def reject(key: str, why: str) -> None:
    """Removes the verdict under `key` (its lock held), warning once why; the caller
    measures again."""
    entry = _entry(key)
    warnings.warn(
        f"mirage_jax: stored verdict {entry} is unusable ({why}); deleting it and timing again",
        RuntimeWarning,
        stacklevel=3,
    )
    cache.remove_entry(entry)


def save(key: str, verdict: dict[str, Any]) -> None:
    """Stores `verdict` under `key` (its lock held) with when and where it was measured,
    replacing any."""
    if not enabled():
        return
    doc = {**verdict, "measured_at": now(), "host": host(), "machine": machine()}
    verdicts = cache.cache_root() / DIRECTORY
    cache.remove_entry(verdicts / key)
    with cache.staged_entry(verdicts, key) as staging:
        (staging / _VERDICT).write_text(json.dumps(doc, indent=1, default=str))
        meta = {
            "kind": KIND,
            "key": key,
            "sha256": cache.sha256_of(staging / _VERDICT),
            **cache.versions(),
        }
        (staging / _META).write_text(json.dumps(meta, indent=1))


def save_or_warn(key: str, verdict: dict[str, Any], what: str) -> None:
    """save(), where a cache that cannot be written is one warning, not an error: the
    decision still holds in this process."""
    try:
        save(key, verdict)
    except OSError as e:
        warnings.warn(
            f"mirage_jax: the verdict of {what} could not be stored ({e})",
            RuntimeWarning,
            stacklevel=3,
        )


def summary(entry: Path) -> str | None:
    """One line of `cache list` for a sound verdict entry: scope, label, decision, ratio
    with interval, rounds, when; None when it does not read."""
    try:
        doc = json.loads((entry / _VERDICT).read_text())
        interval = f"[{doc['low']:.2f}, {doc['high']:.2f}]" if "low" in doc else "[-]"
        chosen = (
            doc["chosen"]
            if doc["chosen"] in ("xla", "jax.jit")
            else "kernel " + str(doc["chosen"])[:12]
        )
        return (
            f"{doc['scope']:<7} {str(doc.get('label', '?'))[:28]:<28} {chosen:<19} "
            f"{doc['ratio']:.2f}x {interval} {doc.get('rounds', 0)} rounds, "
            f"{doc.get('measured_at', '?')} on {doc.get('host', '?')}"
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None

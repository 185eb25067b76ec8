"""Region estimates (rewrite/budget.py) kept in the cache, one kind of entry of the shared
store: measured once per region graph and machine, so that every later process decides the
same regions are worth searching, without timing XLA again.

The key is the region graph's hash, the backend and the machine (CPU model, usable cores,
the accelerator's kind, the versions): another machine measures afresh.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
from pathlib import Path

import jax

from mirage_jax.cache import store
from mirage_jax.rewrite.budget import Estimate

KIND = "estimate"
DIRECTORY = "estimates"
_FILE = "estimate.json"


@functools.cache
def machine(backend: str) -> dict[str, str]:
    """What makes two machines time alike, as far as a process can tell."""
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    device = jax.devices("gpu" if backend == "cuda" else "cpu")[0]
    return {
        "cpu": model,
        "cores": str(cores),
        "device": getattr(device, "device_kind", device.platform),
        **store.versions(),
    }


def _key(graph_hash: str, backend: str) -> str:
    text = json.dumps({"graph": graph_hash, "backend": backend, **machine(backend)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read(entry: Path) -> Estimate:
    doc = json.loads((entry / _FILE).read_text())
    xla_s, bound_s = float(doc["xla_s"]), float(doc["bound_s"])
    if not (xla_s > 0 and bound_s >= 0):
        raise ValueError(f"times out of range: xla_s={xla_s}, bound_s={bound_s}")
    return Estimate(xla_s, bound_s)


def problem(entry: Path) -> str | None:
    try:
        _read(entry)
    except Exception as e:
        return f"unreadable estimate ({type(e).__name__}: {e})"
    return None


store.register_kind(KIND, DIRECTORY, problem, files=frozenset({_FILE}))


def load(graph_hash: str, backend: str) -> Estimate | None:
    """The stored estimate, or None (none yet, or a damaged one, which is removed)."""
    entry = store.cache_root() / DIRECTORY / _key(graph_hash, backend)
    if not entry.exists() and not entry.is_symlink():
        return None
    try:
        return _read(entry)
    except Exception:
        store.remove_entry(entry)  # measured again and rewritten by the caller
        return None


def save(graph_hash: str, backend: str, estimate: Estimate) -> None:
    parent = store.cache_root() / DIRECTORY
    key = _key(graph_hash, backend)
    with store.locked(parent / ".locks" / f"{key}.lock"):
        if (parent / key).exists():
            return  # another process measured it first: its figures stand
        with store.staged_entry(parent, key) as staging:
            store.write_json(
                staging / _FILE,
                {"xla_s": estimate.xla_s, "bound_s": estimate.bound_s, **machine(backend)},
            )

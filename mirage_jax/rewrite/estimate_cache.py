"""Region estimates (rewrite/budget.py) kept in the cache, one kind of entry of the shared
store: measured once per region graph and machine, so that every later process decides the
same regions are worth searching, without timing XLA again.

The key is the region graph's hash, the backend and the machine (verdict_cache.machine():
CPU model, cores, device, versions): another machine measures afresh. Estimates are
decisions like verdicts, and $MIRAGE_JAX_VERDICTS=0 turns both off.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from mirage_jax.cache import store
from mirage_jax.rewrite.budget import Estimate
from mirage_jax.superopt import verdict_cache

KIND = "estimate"
DIRECTORY = "estimates"
_FILE = "estimate.json"


def _key(graph_hash: str, backend: str, cold_caches: bool = False) -> str:
    parts: dict[str, object] = {
        "graph": graph_hash,
        "backend": backend,
        "machine": verdict_cache.machine(),
    }
    if cold_caches:  # absent otherwise: warm estimates keep the keys they were stored under
        parts["timing"] = "cold caches"
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read(entry: Path) -> Estimate:
    doc = json.loads((entry / _FILE).read_text())
    xla_s, bound_s = float(doc["xla_s"]), float(doc["bound_s"])
    if not (xla_s > 0 and bound_s >= 0):
        raise ValueError(f"times out of range: xla_s={xla_s}, bound_s={bound_s}")
    return Estimate(xla_s, bound_s)


problem = store.read_problem(_read, "estimate")

store.register_kind(KIND, DIRECTORY, problem, files=frozenset({_FILE}))


def _load(entry: Path) -> Estimate | None:
    return store.load_entry(entry, _read)


def load_or_measure(
    graph_hash: str, backend: str, cold_caches: bool, measure: Callable[[], Estimate]
) -> Estimate:
    """The stored estimate, else measure() stored. Processes started together measure once:
    the measurement runs under the key's lock, and the others wait and read it. With verdicts
    off ($MIRAGE_JAX_VERDICTS=0, which turns estimates off with them) it measures, storing
    nothing."""
    if not verdict_cache.enabled():
        return measure()
    parent = store.cache_root() / DIRECTORY
    key = _key(graph_hash, backend, cold_caches)
    found = _load(parent / key)
    if found is not None:
        return found
    with store.locked(parent / ".locks" / f"{key}.lock"):
        found = _load(parent / key)  # another process may have measured it meanwhile
        if found is not None:
            return found
        estimate = measure()
        with store.staged_entry(parent, key) as staging:
            store.write_json(
                staging / _FILE, {"xla_s": estimate.xla_s, "bound_s": estimate.bound_s}
            )
    return estimate

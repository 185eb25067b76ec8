"""The on-disk cache of search results, one kind of entry of the shared store
(mirage_jax/cache/store.py).

A search costs seconds to hours; its result depends only on the input graph, the search
config, the backend and target, and the code doing the search. The key hashes exactly those
(the C++ core's own bytes included, so a rebuilt search never reuses an older one's answer).
An entry is a directory searches/<key>/ holding result.json (the candidates as KernelGraph
JSON, their costs, the stats and the reason) and meta.json (versions and result.json's
sha256). Entries are published with the store's staging and lock, so two
processes never search one key at once: the second waits for the first and then reads its
entry. An entry that fails its checksum or does not parse is deleted and searched again, with
a warning.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path

from mirage_jax.cache import store as cache
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.superopt import calibration_cache, machine
from mirage_jax.superopt.search import SearchResult, SearchStats

KIND = "search"
DIRECTORY = "searches"
_RESULT = "result.json"
_META = "meta.json"
# Thread count is left out of the key: the search returns the same candidates, in the same
# order, whatever the number of threads (cc/search/result_set.h). So is the time budget: the
# optimizer sizes it per region from the function's budget, and a search that ran to its
# end answers every budget; one cut short by its budget answers the same or smaller budgets
# (the entry records it), and a larger one searches again and replaces it.
_FIELDS_NOT_IN_KEY = ("threads", "time_budget_s")
_BUDGET_SPENT = "time budget spent"
# A search a hook stopped holds whatever it had found by then; it is not worth keeping.
_UNCACHED_REASONS = ("stopped",)


# The name the tests and the fingerprint know it by.
_core_digest = machine.core_digest


def search_key(graph, config, backend: str) -> str:
    """The cache key of searching `graph` with `config` for `backend`."""
    fields = {k: v for k, v in dataclasses.asdict(config).items() if k not in _FIELDS_NOT_IN_KEY}
    parts = {
        "graph": graph.hash(),
        "config": fields,
        "backend": backend,
        "target": config.target,
        # The ranking (and so which candidates max_verified keeps) follows the target's
        # numbers: this machine's calibration for "cpu".
        "target_numbers": calibration_cache.cpu_target()[1] if config.target == "cpu" else None,
        "versions": cache.versions(),
        "core": _core_digest(),
        "search_code": machine.search_code_digest(),
    }
    text = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _encode(result, budget_s: float) -> str:
    return json.dumps(
        {
            "time_budget_s": budget_s,
            "candidates": [c.to_json() for c in result.candidates],
            "costs": list(result.costs),
            "stats": dataclasses.asdict(result.stats),
            "reason": result.reason,
            "parts": result.parts,
        },
        indent=1,
    )


def _decode(text: str):
    return _decode_doc(json.loads(text))


def _budget_of(entry: Path) -> float:
    """The time budget the entry's search ran with (inf for entries written before budgets
    were recorded: they were searched with their whole key's budget)."""
    return float(json.loads((entry / _RESULT).read_text()).get("time_budget_s", math.inf))


def _decode_doc(doc: dict):
    candidates = [KernelGraph.from_json(c) for c in doc["candidates"]]
    if len(candidates) != len(doc["costs"]):
        raise ValueError(f"{len(candidates)} candidates but {len(doc['costs'])} costs")
    return SearchResult(
        candidates=candidates,
        costs=[float(c) for c in doc["costs"]],
        stats=SearchStats(**doc["stats"]),
        reason=str(doc["reason"]),
        parts=str(doc.get("parts", "")),
    )


def entry_problem(entry: Path) -> str | None:
    """None when `entry` holds a result matching its checksum, else what is wrong (the
    cheap check: parsing the graphs is left to load)."""
    try:
        meta = json.loads((entry / _META).read_text())
        actual = cache.sha256_of(entry / _RESULT)
    except (OSError, ValueError) as e:
        return f"unreadable ({e})"
    if meta.get("sha256") != actual:
        return "its result does not match the recorded checksum"
    return None


def _load(entry: Path):
    """(result, None) from a sound entry, else (None, what is wrong)."""
    problem = entry_problem(entry)
    if problem is not None:
        return None, problem
    try:
        return _decode((entry / _RESULT).read_text()), None
    except Exception as e:  # a graph the IR now rejects, a missing field, ...
        return None, f"its result does not load ({type(e).__name__}: {e})"


def load_problem(entry: Path) -> str | None:
    """None when `entry` loads as a sound result, else what is wrong (the thorough check of
    `cache verify`: the checksum, then every candidate graph through the IR's checks)."""
    return _load(entry)[1]


cache.register_kind(KIND, DIRECTORY, load_problem)
cache.register_fingerprint("core", _core_digest)
# Verdicts follow the search's candidates: a region kept as XLA for want of one is decided
# again by a search that can find more.
cache.register_fingerprint("search_code", lambda: machine.search_code_digest())


def _store(searches: Path, key: str, result, budget_s: float) -> None:
    with cache.staged_entry(searches, key) as staging:
        (staging / _RESULT).write_text(_encode(result, budget_s))
        meta = {
            "kind": KIND,
            "key": key,
            "sha256": cache.sha256_of(staging / _RESULT),
            "core": _core_digest(),
            "search_code": machine.search_code_digest(),
            **cache.versions(),
        }
        (staging / _META).write_text(json.dumps(meta, indent=1))


def cached_search(graph, config, backend: str, run_search: Callable):
    """(result, hit): the cached result of searching `graph`, else run_search() stored
    under its key. `hit` says whether the cache answered."""
    searches = cache.cache_root() / DIRECTORY
    key = search_key(graph, config, backend)
    entry = searches / key

    def answers(result) -> bool:
        return result.reason != _BUDGET_SPENT or _budget_of(entry) >= config.time_budget_s

    if entry.is_dir():
        result, _ = _load(entry)
        if result is not None and answers(result):
            return result, True
    with cache.locked(searches / ".locks" / f"{key}.lock"):
        # Another process may have searched (or repaired) it while we waited for the lock.
        problem = None
        if entry.exists():
            result, problem = _load(entry)
            if result is not None and answers(result):
                return result, True
            # result not None here: it was cut short by a smaller budget; search longer
        if problem is not None:
            warnings.warn(
                f"mirage_jax: cached search result {entry} is corrupt ({problem}); "
                f"deleting it and searching again",
                RuntimeWarning,
                stacklevel=2,
            )
            cache.remove_entry(entry)  # whatever its shape: a file, a link, a tree
        result = run_search()
        if result.reason not in _UNCACHED_REASONS:
            if entry.exists():
                cache.remove_entry(entry)
            _store(searches, key, result, config.time_budget_s)
    return result, False

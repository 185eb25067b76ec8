"""The "cpu" target the search ranks for: the calibration of this machine
(superopt/calibration.py), measured once and kept in the cache as one kind of entry of the
shared store, keyed by the machine (machine_description: CPU model, usable cores, the C++
core, the probes' code, versions), so another machine, or this one after an upgrade or a
change of the probes, measures afresh.

$MIRAGE_JAX_CALIBRATION=0 ranks with the presets instead (cc/cost/target.cc), with only the
core count and last-level cache taken from this machine: the test suite sets it, so that
rankings do not depend on the machine the tests run on. `python -m mirage_jax calibrate`
shows the stored numbers or measures them again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import threading
import warnings
from pathlib import Path

from absl import logging

from mirage_jax import _core
from mirage_jax.cache import store
from mirage_jax.runtime import cold_inputs
from mirage_jax.superopt import calibration, machine
from mirage_jax.superopt.calibration import Calibration

ENV = "MIRAGE_JAX_CALIBRATION"
KIND = "calibration"
DIRECTORY = "calibrations"
_FILE = "calibration.json"

# One measurement per process: a process that moves to another cache root stores the
# numbers it already has there instead of measuring again.
_measured: dict[str, Calibration] = {}
# Machines whose calibration failed in this process, with why: not measured again.
_failed: dict[str, str] = {}
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def machine_description() -> dict[str, object]:
    """What the probes' results depend on: the CPU and the cores this process may use, and
    the software that generates and compiles the probe kernels."""
    return {
        "cpu": machine.cpu_model(),
        "cores": calibration.usable_cores(),
        "arch": platform.machine(),
        "core": machine.core_digest(),
        "calibration_code": machine.calibration_code_digest(),
        **store.versions(),
    }


def _key() -> str:
    text = json.dumps({"machine": machine_description()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read(entry: Path) -> Calibration:
    return Calibration.from_json(json.loads((entry / _FILE).read_text())["calibration"])


problem = store.read_problem(_read, "calibration")

store.register_kind(KIND, DIRECTORY, problem, files=frozenset({_FILE}))


def _load(entry: Path) -> Calibration | None:
    return store.load_entry(entry, _read)


def _store(parent: Path, key: str, found: Calibration) -> None:
    doc = {
        "calibration": found.to_json(),
        "measured_at": machine.now(),
        "host": machine.host(),
        # A loaded machine measures slower: `python -m mirage_jax calibrate` shows this.
        "load": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "machine": machine_description(),
    }
    with store.staged_entry(parent, key) as staging:
        store.write_json(staging / _FILE, doc)


def location() -> Path:
    """Where this machine's calibration is kept in the current cache root."""
    return store.cache_root() / DIRECTORY / _key() / _FILE


def stored_record() -> tuple[Calibration, dict] | None:
    """(this machine's stored calibration, its whole record: when, where, under what load),
    or None."""
    entry = store.cache_root() / DIRECTORY / _key()
    found = _load(entry)
    if found is None:
        return None
    return found, json.loads((entry / _FILE).read_text())


def load_or_measure(remeasure: bool = False) -> Calibration:
    """This machine's calibration: from the cache, else measured (seconds) and stored.
    Processes started together measure once: the measurement runs under the key's lock. A
    process keeps the first calibration it loads or measures: a cache root without one (a
    benchmark's fresh root per program) gets that one stored, not a new measurement that
    would rank its candidates by other figures. So does a cache root without one when the
    machine's own root (store.machine_root: $MIRAGE_JAX_CACHE or ~/.cache/mirage_jax, where
    a function given its own cache_dir does not look otherwise) has one: the calibration is
    the machine's, and measuring it took 14 s of a 31 s first call here. A measurement is
    stored in both."""
    parent = store.cache_root() / DIRECTORY
    key = _key()
    if not remeasure:
        found = _load(parent / key)
        if found is not None:
            _measured.setdefault(key, found)
            return found
    with _lock, store.locked(parent / ".locks" / f"{key}.lock"):
        found = None if remeasure else _load(parent / key)
        if found is not None:
            return found
        found = None if remeasure else _measured.get(key)
        machine_parent = store.machine_root() / DIRECTORY
        if found is None and not remeasure and machine_parent != parent:
            found = _load(machine_parent / key)
            if found is not None:
                _measured[key] = found
        if found is None:
            logging.info(
                "mirage_jax: calibrating the CPU cost model for this machine (once; kept in %s)",
                parent,
            )
            found = calibration.measure(lambda line: logging.info("mirage_jax: %s", line))
            logging.info("mirage_jax: calibrated: %s", found.summary())
            _measured[key] = found
            if machine_parent != parent:
                _store_in_machine_root(machine_parent, key, found)
        _replace(parent, key, found)
    return found


def _replace(parent: Path, key: str, found: Calibration) -> None:
    if (parent / key).exists():
        store.remove_entry(parent / key)
    _store(parent, key, found)


def _store_in_machine_root(parent: Path, key: str, found: Calibration) -> None:
    """Keeps a measurement for the machine's other cache roots too, where that root can be
    written (a read-only home keeps it in the function's cache root only)."""
    try:
        with store.locked(parent / ".locks" / f"{key}.lock"):
            _replace(parent, key, found)
    except OSError as e:
        logging.info("mirage_jax: the calibration is not kept in %s: %s", parent, e)


def preset_target() -> _core.Target:
    """The presets, with this machine's core count and last-level cache."""
    t = _core.Target.cpu_host()
    t.cores = calibration.usable_cores()
    t.last_level_cache_bytes = cold_inputs.last_level_cache_bytes()
    t.vector_width_floats = machine.vector_floats()
    t.check()
    return t


def cpu_target() -> tuple[_core.Target, dict[str, object]]:
    """(the "cpu" target, what it was made from: a search cache key part). A calibration that
    cannot be measured (no C++ compiler, a probe that fails) ranks with the presets, with one
    warning per process: the search needs no kernel, so it must not fail for want of one."""
    if enabled() and _key() not in _failed:
        try:
            found = load_or_measure()
        except Exception as e:
            _failed[_key()] = f"{type(e).__name__}: {str(e)[:300]}"
            warnings.warn(
                f"mirage_jax: the CPU cost model could not be calibrated on this machine "
                f"({_failed[_key()]}); ranking with its presets",
                RuntimeWarning,
                stacklevel=2,
            )
        else:
            return found.target(), {"calibration": found.to_json()}
    t = preset_target()
    return t, {"presets": True, "cores": t.cores, "llc": t.last_level_cache_bytes}

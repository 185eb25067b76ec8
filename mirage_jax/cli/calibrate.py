"""python -m mirage_jax calibrate: the numbers the CPU cost model ranks candidates with on this
machine (mirage_jax/superopt/calibration.py), as stored in the cache, measured now if there
are none; --remeasure measures them again (after a hardware change, or when they were
measured on a loaded machine: the load is recorded with them)."""

from __future__ import annotations

import argparse
import os

from mirage_jax.superopt import calibration_cache


def add_parser(commands: argparse._SubParsersAction) -> None:
    calibrate = commands.add_parser(
        "calibrate",
        help="show (or measure) this machine's numbers for the CPU cost model",
        description=__doc__,
    )
    calibrate.add_argument(
        "--remeasure", action="store_true", help="measure again and replace the stored numbers"
    )


def run(args: argparse.Namespace) -> int:
    where = calibration_cache.location()
    found = None if args.remeasure else calibration_cache.stored_record()
    if found is None:
        print(f"measuring this machine (a few seconds; kept in {where.parent})")
        calibration_cache.load_or_measure(remeasure=True)
        found = calibration_cache.stored_record()
    assert found is not None  # just stored
    calibration, doc = found
    print(f"calibration of this machine ({where}):")
    print(f"  {calibration.summary()}")
    print(
        f"  measured {doc.get('measured_at', '?')} on {doc.get('host', '?')}, load average "
        f"{doc.get('load', '?')} then"
    )
    if not calibration_cache.enabled():
        print(
            f"  not used: ${calibration_cache.ENV}=0 ranks with the presets "
            f"({os.environ.get(calibration_cache.ENV)!r})"
        )
    return 0

"""Differential testing at scale: random programs (tests/fuzz_programs.py) under
mj.optimize with generated kernels kept ($MIRAGE_JAX_KEEP_KERNELS=1) against jax.jit, on
standard-normal and adversarial inputs (masks, zeros, NaN/±inf).

    python benchmarks/fuzz.py --n 1000 [--seed S] [--out DIR] [--cache DIR]

Writes DIR/fuzz.json (counts of mismatches, crashes and programs that used kernels; each
failing program's seed, source and failure, so it can be replayed with --only SEED) and
prints a one-line summary. Exit status 1 when any program mismatched or crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT / "tests"))
os.environ["MIRAGE_JAX_KEEP_KERNELS"] = "1"  # before mirage_jax reads it (it reads per call)

import fuzz_programs  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="how many programs")
    parser.add_argument("--seed", type=int, default=0, help="the first program's seed")
    parser.add_argument("--only", type=int, nargs="*", help="replay these seeds only")
    parser.add_argument("--out", default=".", help="where fuzz.json goes")
    parser.add_argument("--cache", default=None, help="the cache (default: a temporary one)")
    args = parser.parse_args(argv)
    seeds = args.only if args.only else list(range(args.seed, args.seed + args.n))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or tmp
        start = time.perf_counter()
        outcomes = []
        for k, seed in enumerate(seeds):
            outcome = fuzz_programs.run_program(fuzz_programs.generate(seed), cache)
            outcomes.append(outcome)
            if outcome.status != "ok":
                print(f"seed {seed}: {outcome.status}: {outcome.detail}", flush=True)
            _write(out, outcomes, seeds, time.perf_counter() - start)  # a partial run counts
            if (k + 1) % 50 == 0:
                print(
                    f"{k + 1}/{len(seeds)} programs, {time.perf_counter() - start:.0f} s",
                    flush=True,
                )
        seconds = time.perf_counter() - start
    summary = _write(out, outcomes, seeds, seconds)
    print(
        f"fuzz: {summary['programs']} programs, {summary['mismatches']} mismatches, "
        f"{summary['crashes']} crashes, {summary['used_kernels']} used generated kernels, "
        f"{seconds:.0f} s ({out / 'fuzz.json'})"
    )
    return 1 if summary["mismatches"] or summary["crashes"] else 0


def _write(out: Path, outcomes: list, seeds: list[int], seconds: float) -> dict:
    summary = {
        "programs": len(outcomes),
        "mismatches": sum(o.status == "mismatch" for o in outcomes),
        "crashes": sum(o.status == "crash" for o in outcomes),
        "used_kernels": sum(o.used_kernels for o in outcomes),
        "seconds": round(seconds, 1),
        "first_seed": seeds[0] if seeds else None,
        "requested": len(seeds),
        "per_program": [
            [o.seed, o.status, o.used_kernels, round(o.seconds, 2)] for o in outcomes
        ],  # seed, status, used kernels, seconds
        "failures": [
            {"seed": o.seed, "status": o.status, "detail": o.detail, "source": o.source}
            for o in outcomes
            if o.status != "ok"
        ],
    }
    (out / "fuzz.json").write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    sys.exit(main())

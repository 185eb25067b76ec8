"""First-call latency and decisions that hold, on the zoo's models (2 cores, cold and warm).

Each measurement runs in a fresh process (`python -P`), as a user's script would:
  jit         jax.jit's first call (trace + compile + run)
  cold        mj.optimize's first call on an empty cache
  warm        the same in new processes on the cache the cold run filled (verdicts loaded)
  background  mj.optimize(background=True)'s first call on an empty cache (jax.jit at once)
and each process reports which regions chose a kernel, so that the runs can be compared.

    PYTHONPATH=. python benchmarks/first_call.py [--cases llama_prefill,llama_decode_b1]
        [--layers 2] [--warm 3] [--budget S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

CHILD = r"""
import dataclasses, json, sys, time
import jax
from benchmarks import models
import mirage_jax as mj

name, layers, mode, cache, budget = sys.argv[1:6]
model, _, kind = name.partition("_")
mod = models.module(model)
cfg = dataclasses.replace(mod.CONFIGS["small"], layers=int(layers))
fn, params, inputs = mod.build(kind, cfg, models.DTYPES["f32"])
args = (params, *inputs)
start = time.perf_counter()
if mode == "jit":
    jax.block_until_ready(jax.jit(fn)(*args))
    print(json.dumps({"seconds": time.perf_counter() - start}))
    sys.exit(0)
options = {"cache_dir": cache, "verbose": False, "background": mode == "background"}
if budget != "default":
    options["budget_s"] = float(budget)
f = mj.optimize(fn, **options)
jax.block_until_ready(f(*args))
seconds = time.perf_counter() - start
if mode == "background":
    f.wait()
chosen = [r.chosen for r in f.regions(*args)]
print(json.dumps({"seconds": seconds, "kernels": f.uses_kernels(*args), "chosen": chosen}))
"""


def run(name: str, layers: int, mode: str, cache: str, budget: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.getcwd(), MIRAGE_JAX_QUIET="1")
    done = subprocess.run(
        [sys.executable, "-P", "-W", "ignore", "-c", CHILD, name, str(layers), mode, cache, budget],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} {mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="llama_prefill,llama_decode_b1,gpt2_prefill")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--warm", type=int, default=3, help="warm processes per case")
    parser.add_argument("--budget", default="default", help="optimize(budget_s=)")
    parser.add_argument(
        "--cold-repeats",
        type=int,
        default=0,
        help="also run this many more cold processes per case, each on an empty cache, and "
        "count how often the kept-kernel set differs from the first",
    )
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}; {args.layers} layers, small size")
    header = "case | jit s | cold s | warm s (each) | background s | same decision"
    print(header)
    print("-" * len(header))
    for name in args.cases.split(","):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as other:
            jit = run(name, args.layers, "jit", cache, args.budget)
            cold = run(name, args.layers, "cold", cache, args.budget)
            warm = [run(name, args.layers, "warm", cache, args.budget) for _ in range(args.warm)]
            background = run(name, args.layers, "background", other, args.budget)
        repeats = []
        for _ in range(args.cold_repeats):
            with tempfile.TemporaryDirectory() as fresh:
                repeats.append(run(name, args.layers, "cold", fresh, args.budget))
        decisions = {json.dumps(r["chosen"]) for r in [cold, *warm]}
        warm_s = ", ".join(f"{w['seconds']:.2f}" for w in warm)
        print(
            f"{name} | {jit['seconds']:.2f} | {cold['seconds']:.2f} | "
            f"{warm_s} | "
            f"{background['seconds']:.2f} | "
            f"{'yes' if len(decisions) == 1 else 'NO'} "
            f"(kernels: {cold['kernels']}, {[w['kernels'] for w in warm]})"
        )
        if repeats:
            differ = sum(r["chosen"] != cold["chosen"] for r in repeats)
            cold_s = ", ".join(f"{r['seconds']:.1f}" for r in repeats)
            print(
                f"  {len(repeats)} more cold runs ({cold_s} s): the kernel set differs from the "
                f"first in {differ}"
            )
            sets = Counter(json.dumps(r["chosen"]) for r in [cold, *repeats])
            for chosen, count in sets.most_common():
                print(f"    {count} run(s) chose {chosen}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

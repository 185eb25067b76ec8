"""What the call of a jitted function right after another function's costs: a generated
kernel and XLA's version of the same program timed in turns of `stretch` calls each, keeping
only the calls after the first of each turn (stretch 1 keeps every call: the two alternate
call by call).

mirage_jax/runtime/profile.py times each function's second call of a round (SETTLE_CALLS)
because of what this shows: alternating call by call, the kernel/XLA ratio moves by phases
of the machine, while the second calls of a turn give the same ratio turn length after turn
length. Programs are either products `x[m, k] @ w[k, n]` (a generated kernel over 2 blocks
and a loop over k, against XLA's dot) or, with --replay, a program's stored candidate from
benchmarks/ranking_replay.py collect against its stored original.

    python benchmarks/switch_cost.py [--shapes 16x256x4096] [--stretches 1,2,4,8,1,2]
        [--calls 400] [--replay FILE --only lora,... [--label c0]] [--quick]

--quick runs a small shape (seconds; the suite runs it) whose times say nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kernels import standard_normal_inputs
from matmul_shapes import parse_shapes
from ranking_replay import load

import mirage_jax as mj
from mirage_jax.ir.product_graphs import column_split_product
from mirage_jax.runtime import cold_inputs

SHAPES = "16x256x4096"
QUICK_SHAPES = "8x64x128"


def turns(
    functions: dict[str, Callable], sets: Sequence[Sequence], calls: int, stretch: int
) -> dict[str, float]:
    """{name: median seconds} over about `calls` timed calls each: the functions take turns
    of `stretch` calls, and a turn's first call is kept only when stretch is 1."""
    rotation = itertools.count()

    def seconds(fn: Callable) -> float:
        args = sets[next(rotation) % len(sets)]
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        return time.perf_counter() - start

    kept: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(max(2, calls // stretch)):
        for name, fn in functions.items():
            timed = [seconds(fn) for _ in range(stretch)]
            kept[name] += timed[1:] if stretch > 1 else timed
    return {name: statistics.median(s) for name, s in kept.items()}


def product_pair(m: int, k: int, n: int) -> tuple[dict[str, Callable], list]:
    k_tile = max(d for d in (8, 16, 32, 64) if k % d == 0) if k % 8 == 0 else k
    kernel = mj.compile(column_split_product(m, k, n, 2 if n % 2 == 0 else 1, k_tile))
    rng = np.random.default_rng(0)
    args = [
        jnp.asarray(rng.standard_normal((m, k)), jnp.float32),
        jnp.asarray(rng.standard_normal((k, n)), jnp.float32),
    ]
    return {"kernel": jax.jit(lambda x, w: kernel(x, w)[0]), "XLA": jax.jit(jnp.matmul)}, args


def replay_pair(doc: dict, program: str, label: str | None) -> tuple[dict[str, Callable], list]:
    rows = [r for r in doc["candidates"] if r["program"] == program]
    if not rows or program not in doc.get("references", {}):
        raise SystemExit(f"switch_cost: the file holds no candidates of {program!r}")
    row = next((r for r in rows if r["label"] == label), None) if label else rows[0]
    if row is None:
        raise SystemExit(f"switch_cost: {program} has no candidate labelled {label!r}")
    graph = mj.KernelGraph.from_json(row["graph"])
    original = mj.KernelGraph.from_json(doc["references"][program])
    functions = {
        f"kernel ({row['label']})": jax.jit(mj.compile(graph)),
        "XLA": jax.jit(mj.compile(original)),
    }
    return functions, standard_normal_inputs(graph)


def check_outputs(name: str, functions: dict, args: list) -> None:
    """SystemExit unless the kernel's outputs match XLA's: times of a wrong kernel say
    nothing."""
    kernel, xla = (jax.tree_util.tree_leaves(fn(*args)) for fn in functions.values())
    for got, want in zip(kernel, xla, strict=True):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        scale = max(float(np.max(np.abs(want))), 1e-30)
        error = float(np.max(np.abs(got - want))) / scale
        if not error < 1e-4:  # float32 sums in another order
            raise SystemExit(f"switch_cost: {name}: the kernel is off XLA's result by {error:.2e}")


def report(name: str, functions: dict, args: list, stretches: list[int], calls: int) -> dict:
    check_outputs(name, functions, args)
    sets = cold_inputs.rotation(args)
    kernel, xla = list(functions)
    rows = []
    for stretch in stretches:
        t = turns(functions, sets, calls, stretch)
        rows.append({"stretch": stretch, "ms": {n: s * 1e3 for n, s in t.items()}})
        print(
            f"{name}: turns of {stretch}: {kernel} {t[kernel] * 1e3:.3f} ms, XLA "
            f"{t[xla] * 1e3:.3f} ms, XLA / kernel {t[xla] / t[kernel]:.2f}",
            flush=True,
        )
    return {"program": name, "rows": rows}


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"takes positive integers a,b,..., got {text!r}")
    return values


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=None, help=f"MxKxN,... (default {SHAPES})")
    parser.add_argument("--stretches", type=_ints, default=[1, 2, 4, 8, 1, 2])
    parser.add_argument("--calls", type=int, default=400, help="timed calls per turn length")
    parser.add_argument("--replay", help="a file of benchmarks/ranking_replay.py collect")
    parser.add_argument("--only", help="the programs of --replay to time")
    parser.add_argument("--label", help="the stored candidate (default: the model's first)")
    parser.add_argument("--json")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.calls < 2:
        raise SystemExit(f"switch_cost: --calls must be at least 2, got {args.calls}")
    calls = 20 if args.quick else args.calls
    results = []
    if args.replay:
        if not args.only:
            raise SystemExit("switch_cost: --replay needs --only PROGRAM,...")
        doc = load(args.replay, args.only)
        for program in args.only.split(","):
            functions, inputs = replay_pair(doc, program, args.label)
            results.append(report(program, functions, inputs, args.stretches, calls))
    else:
        shapes = args.shapes or (QUICK_SHAPES if args.quick else SHAPES)
        for m, k, n in parse_shapes(shapes, "switch_cost", "16x256x4096"):
            functions, inputs = product_pair(m, k, n)
            name = f"[{m}, {k}] @ [{k}, {n}]"
            results.append(report(name, functions, inputs, args.stretches, calls))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Generated small-M products x[m, k] @ w[k, n] over grids and tile heights, beside XLA's dot,
timed alternating in one process (mirage_jax/runtime/profile.py, inputs rotated past the
last-level cache).

A memory-bound product streams its weight once whatever its tiles; the search picks among
grids (blocks over n) and loop lengths (k_tile rows of w per iteration) that the cost model
prices alike, so the generated code must make them run alike too. Each kernel's time is
printed with its rate and as a ratio to XLA's dot and to the fastest kernel of its shape.
This is how the prefetch distance of the generated matmuls was found to cost a quarter of
the rate with tall tiles (cc/codegen/cpu/prelude.cc, matmul_rows).

    python benchmarks/gemv_tiles.py [--shapes 1x4096x4096,8x4096x4096] [--blocks 2,4,8]
        [--k-tiles 8,32,64,128] [--dtype f32|bf16|f32-bf16] [--budget 6] [--warm] [--json FILE]
        [--quick]

--warm gives every call the same inputs, so that a weight the last-level cache holds is read
from it (a small model's layers between decode steps); otherwise each call reads fresh copies.
--dtype bf16 makes x, w and the result bfloat16 (XLA's dot in bfloat16 beside them), f32-bf16
a float32 x times a bfloat16 w; with more than 8 rows of x the kernels multiply on the AMX
tile unit where the CPU has one.
--quick runs one small shape (seconds; the suite runs it) whose times say nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from matmul_shapes import parse_shapes

import mirage_jax as mj
from mirage_jax.ir.product_graphs import column_split_product
from mirage_jax.runtime import cold_inputs, profile

SHAPES = "1x4096x4096,8x4096x4096"
QUICK_SHAPES = "2x64x128"
XLA = "XLA dot"


def _ints(flag: str, text: str) -> list[int]:
    items = text.split(",")
    if not all(i.isdigit() and int(i) > 0 for i in items):
        raise SystemExit(f"gemv_tiles: {flag} takes positive integers, got {text!r}")
    return [int(i) for i in items]


def label(blocks: int, k_tile: int) -> str:
    return f"grid {blocks}, k_tile {k_tile}"


# --dtype: of x and of w (x @ w takes x's)
DTYPES = {
    "f32": ("float32", "float32"),
    "bf16": ("bfloat16", "bfloat16"),
    "f32-bf16": ("float32", "bfloat16"),
}
# float32 sums of the same products in another order; a bfloat16 result is also rounded once
TOLERANCE = {"f32": 1e-4, "bf16": 2.0**-7, "f32-bf16": 1e-4}


def measure(
    m: int,
    k: int,
    n: int,
    grids: list[int],
    k_tiles: list[int],
    budget_s: float,
    warm: bool,
    dtype: str = "f32",
) -> dict:
    configs = [(b, t) for b, t in itertools.product(grids, k_tiles) if n % b == 0 and k % t == 0]
    if not configs:
        raise SystemExit(f"gemv_tiles: no grid divides n={n} with a k_tile dividing k={k}")
    functions = {XLA: jax.jit(lambda a, b: a @ b)}
    for b, t in configs:
        fn = mj.compile(column_split_product(m, k, n, b, t, *DTYPES[dtype]))
        functions[label(b, t)] = jax.jit(lambda a, w, fn=fn: fn(a, w)[0])
    rng = np.random.default_rng(0)
    args = [
        jax.device_put(rng.standard_normal(s, dtype=np.float32).astype(d))
        for s, d in zip(((m, k), (k, n)), DTYPES[dtype])
    ]
    want = np.asarray(functions[XLA](*args), np.float64)
    errors = {}
    for name, fn in functions.items():
        got = np.asarray(fn(*args), np.float64)
        errors[name] = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        if not errors[name] < TOLERANCE[dtype]:
            raise SystemExit(f"gemv_tiles: {name} is off by {errors[name]:.2e} at {m}x{k}x{n}")
    rotation = None if warm else cold_inputs.rotation(args)
    times, rounds = profile.median_times(functions, args, budget_s, rotation)
    return {
        "shape": [m, k, n],
        "dtype": dtype,
        "rounds": rounds,
        "ms": {name: times[name] * 1e3 for name in functions},
        "error": max(errors.values()),
        "configs": [[b, t] for b, t in configs],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=None, help=f"MxKxN,... (default {SHAPES})")
    parser.add_argument("--blocks", default="2,4,8", help="grids over n (default 2,4,8)")
    parser.add_argument("--k-tiles", default="8,32,64,128", help="rows of w per iteration")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="f32", help="of x, w and x @ w")
    parser.add_argument("--budget", type=float, default=6.0, help="seconds of timing per shape")
    parser.add_argument(
        "--warm", action="store_true", help="the same inputs every call (w stays in the caches)"
    )
    parser.add_argument("--json")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        raise SystemExit(f"gemv_tiles: --budget must be positive, got {args.budget}")
    shapes = parse_shapes(
        args.shapes or (QUICK_SHAPES if args.quick else SHAPES), "gemv_tiles", "1x4096x4096"
    )
    grids, k_tiles = _ints("--blocks", args.blocks), _ints("--k-tiles", args.k_tiles)
    rows = []
    for m, k, n in shapes:
        budget_s = 0.2 if args.quick else args.budget
        row = measure(m, k, n, grids, k_tiles, budget_s, args.warm, args.dtype)
        ms = row["ms"]
        fastest = min(t for name, t in ms.items() if name != XLA)
        print(
            f"[{m}, {k}] @ [{k}, {n}] {args.dtype}, {row['rounds']} rounds: {XLA} {ms[XLA]:.3f} ms"
        )
        for b, t in row["configs"]:
            s = ms[label(b, t)]
            rate = np.dtype(DTYPES[args.dtype][1]).itemsize * k * n / (s * 1e-3) / 1e9
            flops = 2 * m * k * n / (s * 1e-3) / 1e9
            print(
                f"  {label(b, t):22s} {s:8.3f} ms  {rate:5.1f} GB/s of w  {flops:6.1f} GFLOP/s  "
                f"{ms[XLA] / s:5.2f}x XLA  {s / fastest:5.2f}x the fastest",
                flush=True,
            )
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])

"""What XLA's CPU dot pays for a bfloat16 weight, against its float32 dot and a generated
product, timed alternating in one process (mirage_jax/runtime/profile.py, inputs rotated past
the last-level cache).

XLA's CPU dots take no 16-bit floats: the HLO widens such a weight into a new float32 buffer
(a `wrapped_convert` loop fusion) before the dot. The cost model prices that pass at the
memory's rate (cc/cost/roofline.cc); how long it really takes depends on the machine's
handling of the new buffer, and superoptimize times a generated product beside such dots for
that reason (mirage_jax/superopt/contenders.py, generated_alternative). Per shape
`[m, k] @ [k, n]` (x float32): XLA's dot with a float32 weight, with a bfloat16 weight, the
widening alone (`w.astype(float32)`), and one generated kernel reading the bfloat16 weight in
place (grid over n, loop over k).

    python benchmarks/widened_dots.py [--shapes 256x1024x1024,256x1024x8192] [--budget 4]
        [--json FILE] [--quick]

--quick runs small shapes (seconds; the suite runs it) whose times say nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from matmul_shapes import parse_shapes

import mirage_jax as mj
from mirage_jax.ir.product_graphs import column_split_product
from mirage_jax.runtime import cold_inputs, profile

SHAPES = "256x1024x1024,256x1024x2816,256x1024x8192"
QUICK_SHAPES = "8x64x128"


def generated_product(m: int, k: int, n: int):
    """x[m, k] @ w[k, n] (w bfloat16) as one generated kernel: blocks over n, a loop over k."""
    blocks = max(d for d in (1, 2, 4, 8) if n % d == 0)
    k_tile = max(d for d in (1, 16, 32, 64) if k % d == 0)
    fn = mj.compile(column_split_product(m, k, n, blocks, k_tile, w_dtype="bfloat16"))
    return lambda a, b, _w32: fn(a, b)[0]


def measure(m: int, k: int, n: int, budget_s: float) -> dict:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((m, k)), jnp.float32)
    w16 = jnp.asarray(rng.standard_normal((k, n)), jnp.bfloat16)
    w32 = w16.astype(jnp.float32)
    functions = {
        "XLA dot, float32 weight": jax.jit(lambda a, _w16, w: a @ w),
        "XLA dot, bfloat16 weight": jax.jit(lambda a, w, _w32: a @ w),
        "widening alone": jax.jit(lambda _a, w, _w32: w.astype(jnp.float32)),
        "generated product, bfloat16 weight": jax.jit(generated_product(m, k, n)),
    }
    args = [x, w16, w32]
    want = np.asarray(functions["XLA dot, bfloat16 weight"](*args), np.float64)
    got = np.asarray(functions["generated product, bfloat16 weight"](*args), np.float64)
    error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    if not error < 1e-4:  # both widen the same bfloat16 values and sum in float32
        raise SystemExit(
            f"widened_dots: the generated product is off by {error:.2e} at {m}x{k}x{n}"
        )
    times, rounds = profile.median_times(functions, args, budget_s, cold_inputs.rotation(args))
    ms = {name: times[name] * 1e3 for name in functions}
    return {"shape": [m, k, n], "rounds": rounds, "ms": ms, "error": error}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=None, help=f"MxKxN,... (default {SHAPES})")
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of timing per shape")
    parser.add_argument("--json")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        raise SystemExit(f"widened_dots: --budget must be positive, got {args.budget}")
    shapes = parse_shapes(
        args.shapes or (QUICK_SHAPES if args.quick else SHAPES), "widened_dots", "256x1024x8192"
    )
    rows = []
    for m, k, n in shapes:
        row = measure(m, k, n, 0.2 if args.quick else args.budget)
        ms = row["ms"]
        f32, bf16 = ms["XLA dot, float32 weight"], ms["XLA dot, bfloat16 weight"]
        gen = ms["generated product, bfloat16 weight"]
        print(
            f"[{m}, {k}] @ [{k}, {n}]: XLA f32 {f32:.3f} ms, XLA bf16 {bf16:.3f} ms "
            f"({bf16 / f32:.2f}x f32), widening alone {ms['widening alone']:.3f} ms, "
            f"generated bf16 {gen:.3f} ms ({bf16 / gen:.2f}x faster than XLA bf16); "
            f"{row['rounds']} rounds, generated vs XLA error {row['error']:.1e}",
            flush=True,
        )
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])

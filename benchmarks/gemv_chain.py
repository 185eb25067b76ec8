"""How fast a decode step's products stream inside a program, not alone: a chain of dependent
GEMVs (x <- tanh(x @ W_i), W_i a different cold [k, k] weight each) in one jitted function, run as
generated kernels and as XLA's dots, beside one product of the chain alone.

A region's own timing (explain, superoptimize) calls its kernel and XLA's program alone, one
jitted call each, and on this machine that favours the kernel: XLA's dot, called alone,
streamed a [1024, 1024] weight 30-40% slower than inside a chain. This measures both, per
product, so that a region's win can be read against the win the whole step can keep. The
kernels are hand-written block graphs (the search's column split: `--blocks` blocks over the
weight's columns, its rows walked in `--k-tile` rows a step), and a one-block kernel in the
chain shows what one core streams alone.

    python benchmarks/gemv_chain.py [--rows 1,4,8] [--k 1024] [--layers 8]
        [--blocks 2] [--k-tile 64] [--budget 4] [--warm] [--quick] [--json FILE]

--warm cycles one set of weights instead of enough to evict them: with a chain that fits the
last-level cache (--layers 2 of [1024, 1024]) it measures the products' arithmetic, as at 8
rows, where a generated panel's chunk of B rows sets its rate.

--quick runs small shapes (seconds; the suite runs it) whose times say nothing.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mirage_jax as mj
from mirage_jax.runtime import profile

# Weight sets cycled through, so that every call reads its weights from memory: together
# more than this many bytes (a few times this machine's last-level cache).
COLD_BYTES = 200e6


def gemv_kernel(rows: int, k: int, n: int, blocks: int, k_tile: int):
    """x[rows, k] @ w[k, n] as one generated kernel: `blocks` blocks over n, a loop over k."""
    kg = mj.KernelGraph()
    x, w = kg.new_input((rows, k)), kg.new_input((k, n))
    bg = mj.BlockGraph(grid=(blocks, 1, 1), forloop_range=k // k_tile)
    split = (1 if blocks > 1 else -1, -1, -1)
    xb = bg.new_input(x, imap=(-1, -1, -1), fmap=1)
    wb = bg.new_input(w, imap=split, fmap=0)
    bg.new_output(bg.accum_sum(bg.matmul(xb, wb)), omap=split)
    (y,) = kg.customized([x, w], bg)
    kg.mark_output(y)
    fn = mj.compile(kg)
    return lambda a, b: fn(a, b)[0]


def chain(product):
    def run(x, *weights):
        for w in weights:
            x = jnp.tanh(product(x, w))
        return x

    return jax.jit(run)


def alone(product):
    return jax.jit(lambda x, *weights: product(x, weights[0]))


def measure(rows: int, args: argparse.Namespace) -> dict:
    k, layers = args.k, args.layers
    n = k  # each product's result is the next one's x
    kernel = gemv_kernel(rows, k, n, args.blocks, args.k_tile)
    one_core = gemv_kernel(rows, k, n, 1, args.k_tile)
    xla = jnp.matmul
    functions = {
        "kernels, chained": chain(kernel),
        "XLA, chained": chain(xla),
        "one-block kernels, chained": chain(one_core),
        "kernel, alone": alone(kernel),
        "XLA, alone": alone(xla),
    }
    weight_bytes = k * n * 4
    # cold: enough sets that each call's weights were evicted since their last use; warm: one
    # set, re-read from the cache when the chain's weights fit in it
    sets = 1 if args.warm else max(2, int(COLD_BYTES // (weight_bytes * layers)) + 1)
    rng = np.random.default_rng(rows)
    inputs = [
        [jax.device_put(jnp.asarray(rng.standard_normal((rows, k)), jnp.float32))]
        + [
            jax.device_put(jnp.asarray(rng.standard_normal((k, n)) / np.sqrt(k), jnp.float32))
            for _ in range(layers)
        ]
        for _ in range(sets)
    ]
    for name in ("kernels, chained", "one-block kernels, chained"):
        got = np.asarray(functions[name](*inputs[0]))
        want = np.asarray(functions["XLA, chained"](*inputs[0]))
        if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{name} disagrees with XLA: max error {np.abs(got - want).max()}")
    times, _ = profile.median_times(functions, inputs[0], budget_s=args.budget, arg_sets=inputs)
    row = {"rows": rows, "k": k, "n": n, "layers": layers, "blocks": args.blocks}
    for name, seconds in times.items():
        products = layers if "chained" in name else 1
        per_product = seconds / products
        row[name] = {
            "ms_per_product": per_product * 1e3,
            "gb_s": weight_bytes / per_product / 1e9,
            "gflop_s": 2 * rows * k * n / per_product / 1e9,
        }
    row["kernel over XLA, chained"] = times["XLA, chained"] / times["kernels, chained"]
    row["kernel over XLA, alone"] = times["XLA, alone"] / times["kernel, alone"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1,4,8", help="batch rows of x, comma-separated")
    parser.add_argument("--k", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8, help="products in the chain")
    parser.add_argument("--blocks", type=int, default=2, help="blocks over the weight's columns")
    parser.add_argument("--k-tile", type=int, default=64, help="weight rows per loop step")
    parser.add_argument("--budget", type=float, default=4.0, help="seconds of timing per row count")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="one set of weights, re-read from the caches when they fit: the product's "
        "arithmetic rate rather than memory's",
    )
    parser.add_argument("--quick", action="store_true", help="small shapes, few rounds")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    if args.quick:
        args.k, args.layers, args.budget, args.k_tile = 128, 3, 0.2, 32
    try:
        rows = [int(r) for r in args.rows.split(",")]
    except ValueError:
        parser.error(f"--rows must be comma-separated integers, got {args.rows!r}")
    for name, value in (
        ("--rows", min(rows)),
        ("--layers", args.layers),
        ("--blocks", args.blocks),
    ):
        if value < 1:
            parser.error(f"{name} must be at least 1, got {value}")
    if args.budget <= 0:
        parser.error(f"--budget must be positive, got {args.budget}")
    if args.k % args.k_tile or args.k % args.blocks:
        parser.error(f"--k-tile {args.k_tile} and --blocks {args.blocks} must divide --k {args.k}")
    results = []
    where = "warm (one set, re-read from the caches)" if args.warm else "cold"
    print(f"x[rows, {args.k}] @ W[{args.k}, {args.k}] float32, weights {where}; per product:")
    for r in rows:
        row = measure(r, args)
        results.append(row)
        parts = "  ".join(
            f"{name} {row[name]['ms_per_product']:.3f} ms ({row[name]['gb_s']:.1f} GB/s, "
            f"{row[name]['gflop_s']:.0f} GFLOP/s)"
            for name in ("kernels, chained", "XLA, chained", "one-block kernels, chained")
        )
        print(f"rows {r}: {parts}")
        print(
            f"        alone: kernel {row['kernel, alone']['ms_per_product']:.3f} ms, XLA "
            f"{row['XLA, alone']['ms_per_product']:.3f} ms; kernel over XLA "
            f"{row['kernel over XLA, chained']:.2f}x chained, "
            f"{row['kernel over XLA, alone']:.2f}x alone",
            flush=True,
        )
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

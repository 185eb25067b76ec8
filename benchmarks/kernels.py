"""Timing of the generated CPU kernels of the paper's hand-written μGraphs against XLA.

For every program at the paper's shapes, `mj.compile(fused)` of the hand-written
μGraph runs against `jax.jit` of the reference program, both on device-resident arrays, in one
process and alternating call by call (the machines here are shared, so only ratios measured
side by side mean anything). Each program is timed with the paper's tiling and with a tiling
chosen for a 2-core CPU. Prints a markdown table of median milliseconds and speedups.

    python benchmarks/kernels.py [--runs 30] [--only rmsnorm_linear_bs8,gated_mlp] [--json out]

Rows named "cpu" use a few large blocks (grid 2-8); "online-cpu" is gqa_prefill written as the
one-kernel online-softmax μGraph (paper_graphs.flash_attention_online) instead of split-KV.
"tied_logits" is not the paper's: a decode step's tied-embedding logits as the frontend lays
them out, E[8192, 768] @ x^T[768, 8] in bfloat16, the generated few-column product;
"tied_logits_f32_b4" the same at batch 4 in float32 (GPT-2's float32 decode step).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import jax
import numpy as np

import mirage_jax as mj
from mirage_jax.ir import paper_graphs as pg
from mirage_jax.ir.graph import BlockGraph, KernelGraph


def tied_logits(rows=8192, hidden=768, columns=8, blocks=64, dtype="bfloat16"):
    """(reference, fused): E[rows, hidden] @ x^T[hidden, columns], E's rows over the blocks."""
    ref = KernelGraph()
    ref.mark_output(
        ref.matmul(ref.new_input((rows, hidden), dtype), ref.new_input((hidden, columns), dtype))
    )
    fused = KernelGraph()
    e, xt = fused.new_input((rows, hidden), dtype), fused.new_input((hidden, columns), dtype)
    bg = BlockGraph(grid=(blocks, 1, 1), forloop_range=1)
    eb = bg.new_input(e, imap=(0, -1, -1), fmap=1)
    xb = bg.new_input(xt, imap=(-1, -1, -1), fmap=0)
    bg.new_output(bg.accum_sum(bg.matmul(eb, xb)), omap=(0, -1, -1), dtype=dtype)
    (y,) = fused.customized([e, xt], bg)
    fused.mark_output(y)
    return ref, fused


# (row name, builder, tiling name, builder keyword arguments). The CPU tilings give each of
# the 2 cores one block with a wide column range that walks K in short steps (stream W
# a few rows of K at a time), or for attention long KV runs per iteration.
CASES = [
    ("rmsnorm_linear_bs8", pg.rmsnorm_linear, "paper", dict(batch=8)),
    ("rmsnorm_linear_bs8", pg.rmsnorm_linear, "cpu", dict(batch=8, col_tile=3072, k_tile=8)),
    ("rmsnorm_linear_bs1", pg.rmsnorm_linear, "paper", dict(batch=1)),
    ("rmsnorm_linear_bs1", pg.rmsnorm_linear, "cpu", dict(batch=1, col_tile=3072, k_tile=8)),
    ("gated_mlp", pg.gated_mlp, "paper", dict()),
    ("gated_mlp", pg.gated_mlp, "cpu", dict(col_tile=2048, k_tile=8)),
    ("gqa_decode", pg.gqa_decode, "paper", dict()),
    ("gqa_decode", pg.gqa_decode, "cpu", dict(kv_splits=2, forloop=8)),
    ("gqa_prefill", pg.gqa_prefill, "paper", dict()),
    ("gqa_prefill", pg.gqa_prefill, "cpu", dict(kv_splits=2, q_tiles=2, forloop=4)),
    # The same attention as one kernel with the online softmax (no combine pass).
    ("gqa_prefill", pg.flash_attention_online, "online-cpu", dict(q_tiles=2, kv_tile=512)),
    ("qknorm_gqa", pg.qknorm_gqa, "paper", dict()),
    ("qknorm_gqa", pg.qknorm_gqa, "cpu", dict(kv_splits=2, q_tiles=2, forloop=4)),
    ("lora", pg.lora, "paper", dict()),
    ("lora", pg.lora, "cpu", dict(col_tile=1024)),
    ("ntrans", pg.ntrans, "paper", dict()),
    ("ntrans", pg.ntrans, "cpu", dict(row_tile=4)),
    ("tied_logits", tied_logits, "cpu", dict()),
    ("tied_logits_f32_b4", tied_logits, "cpu", dict(columns=4, dtype="float32")),
]


def standard_normal_inputs(graph, seed=0):
    rng = np.random.default_rng(seed)
    return [
        jax.device_put(rng.standard_normal(t.shape, dtype=np.float32).astype(t.dtype))
        for t in graph.inputs
    ]


def _block(out):
    jax.block_until_ready(out)
    return out


def _max_rel_err(got, want):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def time_pair(xla_fn, mj_fn, args, runs, warmup=3):
    for _ in range(warmup):
        _block(xla_fn(*args))
        _block(mj_fn(*args))
    xs, ms = [], []
    for i in range(runs):
        # Alternate which goes first, so that neither always follows the other's cache state.
        order = ((xla_fn, xs), (mj_fn, ms)) if i % 2 == 0 else ((mj_fn, ms), (xla_fn, xs))
        for fn, into in order:
            t0 = time.perf_counter()
            _block(fn(*args))
            into.append(time.perf_counter() - t0)
    return statistics.median(xs) * 1e3, statistics.median(ms) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--only", default="", help="comma-separated row names or name:tiling")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}

    rows = []
    for name, build, tiling, kwargs in CASES:
        if only and name not in only and f"{name}:{tiling}" not in only:
            continue
        ref, fused = build(**kwargs)
        inputs = standard_normal_inputs(ref)
        xla_fn = jax.jit(mj.compile(ref))
        mj_fn = jax.jit(mj.compile(fused))
        err = _max_rel_err(mj_fn(*inputs)[0], xla_fn(*inputs)[0])
        load = os.getloadavg()[0]
        xla_ms, mj_ms = time_pair(xla_fn, mj_fn, inputs, args.runs)
        rows.append(
            dict(
                program=name,
                tiling=tiling,
                params=kwargs,
                xla_ms=xla_ms,
                mirage_ms=mj_ms,
                speedup=xla_ms / mj_ms,
                max_rel_err=err,
                load=load,
            )
        )
        print(
            f"  {name} [{tiling}] xla {xla_ms:.2f} ms, mirage {mj_ms:.2f} ms "
            f"({xla_ms / mj_ms:.2f}x, err {err:.1e}, load {load:.1f})",
            flush=True,
        )

    print()
    print("| program | tiling | XLA ms | mirage_jax ms | speedup | max rel err |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items() if k != "batch")
        print(
            f"| {r['program']} | {r['tiling']} ({params or 'defaults'}) | {r['xla_ms']:.2f} "
            f"| {r['mirage_ms']:.2f} | {r['speedup']:.2f}x | {r['max_rel_err']:.1e} |"
        )

    def geomean(sp):
        return math.exp(sum(map(math.log, sp)) / len(sp))

    programs = list(dict.fromkeys(r["program"] for r in rows))
    best = {p: max(r["speedup"] for r in rows if r["program"] == p) for p in programs}
    print(
        f"\ngeometric mean speedup, best tiling per program: {geomean(list(best.values())):.2f}x "
        f"over {len(best)} programs"
    )
    for tiling in sorted({r["tiling"] for r in rows}):
        sp = [r["speedup"] for r in rows if r["tiling"] == tiling]
        print(
            f"geometric mean speedup, {tiling} tilings: {geomean(sp):.2f}x over {len(sp)} programs"
        )
    slow = [f"{p} ({b:.2f}x)" for p, b in best.items() if b < 1.0]
    if slow:
        print("below 1.0x even with the best tiling: " + ", ".join(slow))
    print(f"load average at the end: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

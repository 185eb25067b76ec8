"""Layers under `lax.scan`, and a decode step's P @ V read from the KV cache as stored:
jax.jit against mirage_jax.optimize in one process, as ratios.

- scanned: RMSNorm + Linear + SiLU with a residual, `layers` of them stacked and run under
  `lax.scan`, float32 and bfloat16 weights. Times jax.jit, mj.optimize as it decides, and the
  rewritten program with every checked kernel kept ($MIRAGE_JAX_KEEP_KERNELS=1), alternating
  call by call, medians; prints whether optimize kept its kernels and its whole-program note.
- decode_pv: the frontend's form of a decode step's P @ V against a [B, S, N, H] cache
  (sum over S of P[B, S, N, 1] * V), superoptimized with its best candidates timed against
  XLA with cold caches: what that kernel is worth alone.
- decode_softmax: the same step's scores, mask and softmax over the keys (9 ops), with the
  decorator's own attention limits (5 block ops, which cannot hold it: the search lifts it
  whole, mirage_jax/superopt/lift.py), timed against XLA with cold caches.

    python -P benchmarks/control_flow.py [--quick] [--runs N]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import alternating_medians

import mirage_jax as mj
from mirage_jax.ir.decode_graphs import decode_pv, decode_softmax
from mirage_jax.superopt.config import ATTENTION
from mirage_jax.superopt.superoptimize import KEEP_KERNELS_ENV


def layer(x, g, w):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    return x + jax.nn.silu((h.astype(w.dtype) @ w).astype(x.dtype))


def scanned(x, gs, ws):
    return jax.lax.scan(lambda x, p: (layer(x, *p), None), x, (gs, ws))[0]


def time_scanned(layers: int, dim: int, dtype, runs: int) -> dict:
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((8, dim)), jnp.float32)
    gs = jnp.asarray(1 + 0.1 * rng.standard_normal((layers, dim)), jnp.float32)
    ws = jnp.asarray(rng.standard_normal((layers, dim, dim)) / np.sqrt(dim), dtype)
    args = (x, gs, ws)
    plain, decided = jax.jit(scanned), mj.optimize(scanned, verbose=False)
    jax.block_until_ready(decided(*args))
    os.environ[KEEP_KERNELS_ENV] = "1"
    try:
        forced = mj.optimize(scanned, verbose=False)
        jax.block_until_ready(forced(*args))
    finally:
        del os.environ[KEEP_KERNELS_ENV]
    xla_s, decided_s = alternating_medians(plain, decided, args, runs)
    xla2_s, forced_s = alternating_medians(plain, forced, args, runs)
    spec = next(iter(decided._specializations.values()))
    lost = [r.headline() for r in decided.regions(*args) if r.chosen != "kernel"]
    return dict(
        forced_kernels=forced.uses_kernels(*args),
        xla_ms=xla_s * 1e3,
        decided_ms=decided_s * 1e3,
        decided=xla_s / decided_s,
        kept=decided.uses_kernels(*args),
        forced_ms=forced_s * 1e3,
        forced=xla2_s / forced_s,
        note=spec.note.splitlines()[0] if spec.note else "; ".join(lost),
    )


def print_superoptimized(graph: mj.KernelGraph, config: mj.SearchConfig, top_k: int) -> None:
    """The search's note on its parts or lift, and the timings, from superoptimize's report."""
    fast = mj.superoptimize(graph, config=config, top_k=top_k, progress=False, cold_caches=True)
    report = fast.report().splitlines()
    lifted = [line for line in report if "lifted whole" in line]
    if lifted:
        print("  " + lifted[0][lifted[0].index("the search fused nothing") :])
    timings = report.index(next(line for line in report if line.startswith("timings")))
    print("\n".join("  " + line for line in report[timings : timings + top_k + 3]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, a few rounds")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    runs = 5 if args.quick else args.runs
    layers, dim = (2, 256) if args.quick else (16, 1024)
    print(f"scanned: {layers} layers of [8, {dim}] x [{dim}, {dim}], medians of {runs}")
    for name, dtype in (("float32", jnp.float32), ("bfloat16", jnp.bfloat16)):
        r = time_scanned(layers, dim, dtype, runs)
        print(
            f"  {name}: jax.jit {r['xla_ms']:.3f} ms, mj.optimize {r['decided_ms']:.3f} ms "
            f"({r['decided']:.2f}x, kernels kept: {r['kept']}); with every kernel forced "
            f"{r['forced_ms']:.3f} ms ({r['forced']:.2f}x, kernels: {r['forced_kernels']})\n"
            f"    {r['note']}"
        )
    shape = (2, 32, 4, 16) if args.quick else (4, 256, 12, 64)
    print(f"decode_pv: P[B, S, N, 1] * V[B, S, N, H] summed over S, (B, S, N, H) = {shape}")
    print_superoptimized(
        decode_pv(*shape), mj.SearchConfig(max_kernel_ops=1, max_block_ops=4, time_budget_s=20), 8
    )
    print(f"decode_softmax: softmax over S of where(mask, sum(q * K) / sqrt(H)), {shape}")
    print_superoptimized(decode_softmax(*shape), dataclasses.replace(ATTENTION, time_budget_s=2), 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

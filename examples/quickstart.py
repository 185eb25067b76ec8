"""Quick start: put @mirage_jax.optimize on an ordinary JAX function and see what it did.

The function is the Mirage paper's RMSNorm + Linear (a transformer layer's input
projection). The first call traces it, finds the regions worth superoptimizing, searches each
for equivalent μGraphs (or loads them from the cache), proves the candidates equivalent,
compiles the best few to CPU kernels, times them against XLA and checks the winner in floats.
The script then prints what was found, checks the result against jax.jit on new data, and
measures the speedup with both running side by side.

    python examples/quickstart.py [--small] [--runs 50] [--cache-dir DIR]

The exit status is 0 when the optimized function agrees with jax.jit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import mirage_jax as mj

TOLERANCE = 1e-4  # normwise, float32: the kernel sums in another order than XLA


def rmsnorm_linear(x, g, w):
    """rms_norm(x) * g @ w, written as any JAX user would."""
    ms = jnp.mean(x * x, axis=-1, keepdims=True)
    return (x * jax.lax.rsqrt(ms + 1e-6) * g) @ w


def random_inputs(batch, hidden, out_features, seed):
    rng = np.random.default_rng(seed)
    # device-resident arrays: a numpy argument is copied on every call
    return [
        jax.device_put(rng.standard_normal(shape, dtype=np.float32))
        for shape in ((batch, hidden), (hidden,), (hidden, out_features))
    ]


def side_by_side(f, g, args, runs):
    """Median seconds of f and g, called alternately after a warm-up."""
    for _ in range(3):
        jax.block_until_ready(f(*args))
        jax.block_until_ready(g(*args))
    tf, tg = [], []
    for i in range(runs):
        for fn, into in ((f, tf), (g, tg)) if i % 2 == 0 else ((g, tg), (f, tf)):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            into.append(time.perf_counter() - start)
    return statistics.median(tf), statistics.median(tg)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--small",
        action="store_true",
        help="X[8,512] W[512,768] instead of the paper's X[8,4096] W[4096,6144]",
    )
    parser.add_argument("--runs", type=int, default=50, help="timed calls of each function")
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="search and kernel cache (default $MIRAGE_JAX_CACHE, else ~/.cache/mirage_jax)",
    )
    args = parser.parse_args(argv)
    batch, hidden, out_features = (8, 512, 768) if args.small else (8, 4096, 6144)

    optimized = mj.optimize(rmsnorm_linear, cache_dir=args.cache_dir)
    x, g, w = random_inputs(batch, hidden, out_features, seed=0)
    print(f"== rmsnorm_linear(x[{batch},{hidden}], g[{hidden}], w[{hidden},{out_features}]) ==")
    start = time.perf_counter()
    jax.block_until_ready(optimized(x, g, w))
    print(
        f"first call: {time.perf_counter() - start:.1f} s (trace, partition, search or load "
        f"from the cache, compile, time against XLA, check); later calls are plain calls"
    )

    print("\n== what optimize found: each region, the μGraph chosen, its verification ==")
    regions = optimized.regions(x, g, w)
    optimized.explain(x, g, w)  # prints the regions, the μGraphs, the checks, the timings

    print("\n== check on new data against jax.jit ==")
    reference = jax.jit(rmsnorm_linear)
    x2, g2, w2 = random_inputs(batch, hidden, out_features, seed=1)
    got = np.asarray(optimized(x2, g2, w2), np.float64)
    want = np.asarray(reference(x2, g2, w2), np.float64)
    error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    correct = error <= TOLERANCE
    print(f"normwise error {error:.2g} (tolerance {TOLERANCE:g}): {'ok' if correct else 'WRONG'}")

    print(f"\n== speed: jax.jit vs mj.optimize, alternating, median of {args.runs} ==")
    t_jit, t_mj = side_by_side(reference, optimized, [x, g, w], args.runs)
    kernels = sum(r.chosen == "kernel" for r in regions)
    runs = (
        "they run"
        if optimized.uses_kernels(x, g, w)
        else "the whole call did not beat jax.jit by the decision's margin: it runs as jax.jit"
    )
    print(f"jax.jit     {t_jit * 1e3:8.3f} ms")
    print(
        f"mj.optimize {t_mj * 1e3:8.3f} ms   speedup {t_jit / t_mj:.2f}x "
        f"({kernels} of {len(regions)} regions beat XLA with a generated kernel; {runs})"
    )
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())

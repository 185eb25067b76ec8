"""Timing of mj.superoptimize's result against XLA, and the search time cold and warm.

For each program at the paper's shapes, `mj.superoptimize(reference, config)`
runs twice with one fresh cache root (a temporary directory, also set as $MIRAGE_JAX_CACHE):
the first call is cold (search, compile and time the top candidates), the second warm (the
search comes from the cache). The callable it returns then runs against `jax.jit` of the
reference, on device-resident arrays, in one process and alternating call by call, as in
benchmarks/kernels.py. Prints a markdown table of median milliseconds and speedups.

    python benchmarks/superoptimize.py [--runs 30] [--only gated_mlp] [--budget 45]
        [--attention] [--top-k 8] [--json out]

The cost model ranks with this machine's calibration (mirage_jax/superopt/calibration.py), or
with its presets under `--presets`. Each row also says how well the cost model ranked the
candidates the cold call compiled and timed (benchmarks/ranking.py): the Spearman
correlation of its estimates with the measured medians, the place of the fastest measured
candidate in its order, and its regret (its first choice's time over the fastest's).
`--top-k` sets how many are compiled (superoptimize's default is 4; 8 lets "fastest in the
top 4" fail).

The search configs are sized so that one search takes well under a minute on a 2-core
machine: one kernel-level op (the whole program fused into one customized op) and at most 5-6
block ops. `--attention` adds gqa_prefill, gqa_decode and qknorm_gqa with the "attention"
kernels: split-KV and combine), which is tried briefly and reported as skipped when the search
does not finish inside the budget.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kernels import _max_rel_err, standard_normal_inputs, time_pair
from ranking import ranking, summarize

import mirage_jax as mj
from mirage_jax.ir import paper_graphs as pg
from mirage_jax.superopt import calibration_cache

# (row name, reference builder, SearchConfig keyword arguments without the time budget)
MLP = dict(preset="mlp", max_kernel_ops=1, max_block_ops=5, threads=2)
# Five block ops hold the online-softmax kernel (matmul, scale, two online accumulators,
# divide); the split-KV kernel needs six, which multiplies the search by ten and, on a CPU,
# measured no faster. Two grid axes, two grids per split (the fewest and the most blocks):
# the cost model then sees that a few large blocks cut K's tiles into many short runs. Only
# the best 8 of the ~180 candidates are verified.
ATTENTION = dict(
    preset="attention",
    max_kernel_ops=2,
    max_block_graphs=2,
    max_block_ops=5,
    max_block_outputs=2,
    max_grid_axes=2,
    max_block_inputs=3,
    max_grids=2,
    max_forloop_ranges=1,
    max_verified=8,
    threads=2,
)
CASES = [
    ("rmsnorm_linear_bs8", lambda: pg.rmsnorm_linear(batch=8)[0], MLP),
    ("rmsnorm_linear_bs1", lambda: pg.rmsnorm_linear(batch=1)[0], MLP),
    ("gated_mlp", lambda: pg.gated_mlp()[0], dict(MLP, max_block_ops=6)),
    ("ntrans", lambda: pg.ntrans()[0], MLP),
    ("lora", lambda: pg.lora()[0], dict(MLP, preset="lora", max_block_ops=4)),
]
ATTENTION_CASES = [
    ("gqa_prefill", lambda: pg.gqa_prefill()[0], ATTENTION),
    ("gqa_decode", lambda: pg.gqa_decode()[0], ATTENTION),
    # Norms and attention do not fit one kernel: superoptimize falls back to searching the
    # attention after the norms on its own (mirage_jax/_split.py).
    ("qknorm_gqa", lambda: pg.qknorm_gqa()[0], ATTENTION),
]


def _report_line(report: str, head: str) -> str:
    """The report's line that starts with `head` ("search:", "chosen:"), without the head."""
    for line in report.splitlines():
        if line.startswith(head):
            return line[len(head) :].strip()
    return ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--only", default="", help="comma-separated row names")
    parser.add_argument(
        "--budget", type=float, default=45.0, help="the search's time_budget_s (seconds)"
    )
    parser.add_argument(
        "--attention",
        action="store_true",
        help="also try gqa_prefill, gqa_decode and qknorm_gqa with the attention preset",
    )
    parser.add_argument(
        "--top-k", type=int, default=4, help="candidates compiled and timed per program"
    )
    parser.add_argument("--report", action="store_true", help="print superoptimize's reports")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    parser.add_argument(
        "--presets",
        action="store_true",
        help="rank with the cost model's presets instead of this machine's calibration",
    )
    args = parser.parse_args()
    if args.presets:
        os.environ[calibration_cache.ENV] = "0"
    if calibration_cache.enabled():
        found = calibration_cache.load_or_measure()
        print(f"cost model: this machine's calibration: {found.summary()}")
    else:
        print("cost model: presets (this machine's cores and cache)")
    only = {s for s in args.only.split(",") if s}
    cases = CASES + (ATTENTION_CASES if args.attention else [])

    rows, skipped, rankings = [], [], []
    for name, build, config_kwargs in cases:
        if only and name not in only:
            continue
        ref = build()
        config = mj.SearchConfig(time_budget_s=args.budget, **config_kwargs)
        root = tempfile.mkdtemp(prefix="mj_bench_cache_")
        old_env = os.environ.get("MIRAGE_JAX_CACHE")
        os.environ["MIRAGE_JAX_CACHE"] = root
        try:
            t0 = time.perf_counter()
            opt = mj.superoptimize(
                ref, config=config, cache_dir=root, progress=False, top_k=args.top_k
            )
            cold = time.perf_counter() - t0
            cold_report = opt.report()
            ranked = ranking(opt.costs, opt.timings)
            rankings.append(ranked)
            t0 = time.perf_counter()
            opt = mj.superoptimize(
                ref, config=config, cache_dir=root, progress=False, top_k=args.top_k
            )
            warm = time.perf_counter() - t0
        finally:
            if old_env is None:
                os.environ.pop("MIRAGE_JAX_CACHE", None)
            else:
                os.environ["MIRAGE_JAX_CACHE"] = old_env
            shutil.rmtree(root, ignore_errors=True)
        report = opt.report()
        if args.report:
            print(cold_report, "\n", report, sep="", flush=True)
        search = _report_line(cold_report, "search:")
        # the search's own wall time: saturate + enumerate (verification included) + rank
        parts = [re.search(rf"{k} ([0-9.]+)", search) for k in ("saturate", "enumerate", "rank")]
        enumerate_s = sum(float(m.group(1)) for m in parts) if all(parts) else float("nan")
        if cold > 60:
            skipped.append(
                f"{name}: the cold superoptimize call took {cold:.0f} s (> 60 s); search: {search}"
            )
        inputs = standard_normal_inputs(ref)
        xla_fn = jax.jit(mj.compile(ref))
        err = _max_rel_err(opt(*inputs)[0], xla_fn(*inputs)[0])
        load = os.getloadavg()[0]
        xla_ms, mj_ms = time_pair(xla_fn, opt, inputs, args.runs)
        chosen = (
            "XLA (no faster candidate)"
            if opt.source == ""
            else _report_line(report, "chosen:").split(", ", 1)[-1]
        )
        rows.append(
            dict(
                program=name,
                chosen=chosen,
                xla_ms=xla_ms,
                mirage_ms=mj_ms,
                speedup=xla_ms / mj_ms,
                own_speedup=opt.speedup,
                max_rel_err=err,
                cold_s=cold,
                warm_s=warm,
                load=load,
                search_s=enumerate_s,
                search=search,
                warm_search=_report_line(report, "search:"),
                timed_candidates=ranked.candidates,
                spearman=ranked.spearman,
                fastest_at_cost_rank=ranked.fastest_rank,
                regret=ranked.regret,
            )
        )
        print(
            f"  {name}: chose {chosen}; xla {xla_ms:.2f} ms, superoptimized {mj_ms:.2f} ms "
            f"({xla_ms / mj_ms:.2f}x; superoptimize said {opt.speedup:.2f}x), err {err:.1e}, "
            f"superoptimize cold {cold:.1f} s, warm {warm:.1f} s, load {load:.1f}; "
            f"{ranked.candidates} candidates timed, Spearman {ranked.spearman:.2f}, fastest "
            f"at cost rank {ranked.fastest_rank}\n"
            f"    cold search: {search}\n    warm search: {_report_line(report, 'search:')}",
            flush=True,
        )

    print()
    print(
        "| program | chosen | XLA ms | superoptimized ms | speedup | max rel err "
        "| search s (cold) | superoptimize cold s | warm s | timed | Spearman "
        "| fastest at cost rank |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['program']} | {r['chosen']} | {r['xla_ms']:.2f} | {r['mirage_ms']:.2f} "
            f"| {r['speedup']:.2f}x | {r['max_rel_err']:.1e} | {r['search_s']:.1f} "
            f"| {r['cold_s']:.1f} "
            f"| {r['warm_s']:.1f} | {r['timed_candidates']} | {r['spearman']:.2f} "
            f"| {r['fastest_at_cost_rank'] or '-'} |"
        )
    if rows:
        sp = [r["speedup"] for r in rows]
        print(
            f"\ngeometric mean speedup: {math.exp(sum(map(math.log, sp)) / len(sp)):.2f}x "
            f"over {len(sp)} programs"
        )
        print(summarize(rankings).line())
    for s in skipped:
        print(f"skipped: {s}")
    print(f"load average at the end: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

"""The model-zoo benchmark: jax.jit(f) against mirage_jax.optimize(f) on the models of
benchmarks/models/ (Llama in Flax nnx, GPT-2 in Flax linen, a BERT-like encoder, a ViT in
Equinox), prefill/encode and KV-cache decode steps.

For every case, on device-resident arrays:
  - wall time of jax.jit(f) and mj.optimize(f), alternating call by call in one process,
    medians of --runs after warm-up, and their ratio;
  - the roofline ceiling: jax.jit's time over the least time any program could take (its
    inputs read and outputs written once at the bandwidth of a large read measured here,
    or its flops at a large matmul's rate, benchmarks/roofline.py; in bfloat16 the faster
    of that and a generated bfloat16 product, mirage_jax/rewrite/budget.py), the highest
    speedup the case allows;
  - regions found, converted to μGraphs, kept as kernels (a kernel beat XLA on its region),
    kept end to end (the rewritten program also beat jax.jit of the whole function), and
    the fraction of matmuls inside converting regions (benchmarks/models/coverage.py);
  - first calls: jax.jit's own (trace and compile); mj.optimize's cold one (an empty
    temporary cache: trace, search, compile, time, check); a warm one in a new process on
    that cache, next to jax.jit's first call in that same process (the issue's "warm"), and
    a fresh mj.optimize object in this process on the same cache;
  - the largest error against jax.jit, normwise per output, on a normal and on a padded
    batch (left and right padding, padding query rows fully masked), both as the user gets
    it and with every checked kernel kept whatever the timing ($MIRAGE_JAX_KEEP_KERNELS=1,
    on the same cache): a non-finite value where jax.jit is finite is a failure, reported as
    such.
It writes results.md, results.json and results.png to --out and prints the table.

    python -m benchmarks --models [--only llama_prefill,...] [--quick] [--out DIR]
        [--runs N] [--dtype f32|bf16] [--budget S]
    python benchmarks/models_run.py ...   (the same)

--quick runs the tiny configurations (decoders' decode step at batch 4 only), 5 rounds and a
2 s search budget per region, so that the whole zoo runs in minutes on two cores.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import models
import models_report
import report
import roofline
from models import coverage
from models.check import TOLERANCE, compare
from ranking import Ranking, ranking, summarize
from timing import alternating_medians, timed_call

import mirage_jax as mj
from mirage_jax.rewrite.budget import bf16_flops_per_s
from mirage_jax.superopt import calibration_cache

QUICK_BUDGET_S = 2.0
KEEP = "MIRAGE_JAX_KEEP_KERNELS"


@contextlib.contextmanager
def _kernels_kept():
    """$MIRAGE_JAX_KEEP_KERNELS=1 for the duration (read by mj.optimize when it specializes)."""
    before = os.environ.get(KEEP)
    os.environ[KEEP] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[KEEP]
        else:
            os.environ[KEEP] = before


def search_config(budget_s):
    """The SearchConfig of every region, or None for the package's per-region defaults."""
    if budget_s is None:
        return None
    return mj.SearchConfig(
        max_kernel_ops=1, max_block_ops=5, time_budget_s=budget_s, max_verified=4
    )


def region_summary(reports) -> dict:
    kernels = [r for r in reports if r.chosen == "kernel"]
    return dict(
        regions=len(reports),
        kernel_regions=len(kernels),
        kernel_primitives=[" ".join(r.primitives) for r in kernels],
        fallbacks=dict(Counter(coverage.normalize(r.reason) for r in reports if r.chosen == "xla")),
    )


def bench_case(name: str, args, cache_dir: str, machine: roofline.Roofline) -> dict:
    case = models.case(name, args.size, args.dtype)
    inputs, padded = case.args(), case.args(padded=True)
    # The least time any program can take: every input read and every output written once
    # at the measured bandwidth, or every flop at the measured matmul rate (roofline.py).
    # A loop (a sampling loop's steps) repeats its work, which neither count sees: no bound.
    work_bytes = roofline.compulsory_bytes(inputs, jax.eval_shape(case.fn, *inputs))
    work_flops = roofline.count_flops(case.fn, inputs)
    looped = roofline.has_loop(case.fn, inputs)
    bound_s = None if looped else machine.time_bound(work_bytes, work_flops)
    config = search_config(args.budget)
    xla = jax.jit(case.fn)
    jit_first_s = timed_call(xla, inputs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimized = mj.optimize(case.fn, config=config, cache_dir=cache_dir)
        cold_s = timed_call(optimized, inputs)
        # a fresh object: no in-memory specialization, only the disk cache
        fresh = mj.optimize(case.fn, config=config, cache_dir=cache_dir)
        warm_same_process_s = timed_call(fresh, inputs)
    warned = sorted({str(w.message) for w in caught if "region at" not in str(w.message)})
    normal = compare(optimized(*inputs), xla(*inputs))
    with_padding = compare(optimized(*padded), xla(*padded))
    xla_s, mj_s = alternating_medians(xla, optimized, inputs, args.runs)
    # Whether the kernels run at all depends on timing; their errors should not: the same
    # cache, with every checked kernel kept whatever the timing (the test-only switch).
    with _kernels_kept():
        forced = mj.optimize(case.fn, config=config, cache_dir=cache_dir)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            kept_normal = compare(forced(*inputs), xla(*inputs))
            kept_padded = compare(forced(*padded), xla(*padded))
            forced_kernels = bool(forced.uses_kernels(*inputs))
    reports = optimized.regions(*inputs)
    rankings = [ranking(r.costs, r.timings) for r in reports if r.costs]
    cov = coverage.probe(case)
    summary = region_summary(reports)
    uses_kernels = bool(optimized.uses_kernels(*inputs))
    tolerance = TOLERANCE[args.dtype]
    failures = []
    for what, result in (
        ("normal batch", normal),
        ("padded batch", with_padding),
        (f"normal batch, kernels kept (${KEEP}=1)", kept_normal),
        (f"padded batch, kernels kept (${KEEP}=1)", kept_padded),
    ):
        if result["nonfinite"] or result["differs"]:
            failures += [
                f"{what}: NON-FINITE where jax.jit is finite, or not equal: {w}"
                for w in result["where"]
            ]
        if result["error"] > tolerance:
            failures.append(f"{what}: error {result['error']:.2e} above {tolerance:g}")
    if failures and summary["kernel_primitives"]:
        failures.append(
            "kernel regions in use: "
            + "; ".join(f"[{p[:120]}]" for p in summary["kernel_primitives"])
        )
    return dict(
        name=name,
        model=case.model,
        mode=case.mode,
        description=case.description,
        shapes=[list(np.shape(x)) for x in jax.tree_util.tree_leaves(case.inputs)],
        xla_ms=xla_s * 1e3,
        mirage_ms=mj_s * 1e3,
        speedup=xla_s / mj_s,
        work_bytes=work_bytes,
        work_flops=work_flops,
        bound_ms=None if bound_s is None else bound_s * 1e3,
        ceiling=None if bound_s is None else xla_s / bound_s,
        jit_first_call_s=jit_first_s,
        cold_s=cold_s,
        warm_same_process_s=warm_same_process_s,
        regions=summary["regions"],
        converted_regions=cov.converting_regions,
        kernel_regions=summary["kernel_regions"],
        uses_kernels=uses_kernels,
        kept_end_to_end=summary["kernel_regions"] if uses_kernels else 0,
        matmuls=len(cov.matmuls),
        matmuls_converting=sum(m.converts for m in cov.matmuls),
        matmul_coverage=cov.fraction,
        coverage_reasons=dict(cov.reasons()),
        fallbacks=summary["fallbacks"],
        kernel_primitives=summary["kernel_primitives"],
        max_rel_err=normal["error"],
        padded_max_rel_err=with_padding["error"],
        nonfinite=normal["nonfinite"],
        padded_nonfinite=with_padding["nonfinite"],
        differs=normal["differs"],
        padded_differs=with_padding["differs"],
        kernels_kept_uses_kernels=forced_kernels,
        kernels_kept_max_rel_err=kept_normal["error"],
        kernels_kept_nonfinite=kept_normal["nonfinite"],
        kernels_kept_differs=kept_normal["differs"],
        kernels_kept_padded_max_rel_err=kept_padded["error"],
        kernels_kept_padded_nonfinite=kept_padded["nonfinite"],
        kernels_kept_padded_differs=kept_padded["differs"],
        correct=not failures,
        failures=failures,
        warnings=warned,
        load=os.getloadavg()[0],
        ranking=summarize(rankings).to_json(),
        rankings=[dataclasses.asdict(r) for r in rankings],
    )


def warm_in_new_process(names: list, args, caches: dict) -> dict:
    """{name: (mj.optimize's first call, jax.jit's first call)} measured in one new process on
    the caches the cold calls filled."""
    request = dict(names=names, size=args.size, dtype=args.dtype, budget=args.budget, caches=caches)
    env = dict(os.environ)
    # the child imports what this process imported (a checkout or the installed package)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child-warm", json.dumps(request)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"the warm-cache process failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return {k: tuple(v) for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def child_warm(request: str) -> int:
    """In the new process: each case's first call of mj.optimize on its warm cache, then
    jax.jit's first call of the same function. The backend is initialized first, so that
    neither pays for it; mj.optimize goes first, so what the two share favors jax.jit."""
    req = json.loads(request)
    jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.zeros(4)))
    config = search_config(req["budget"])
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in req["names"]:
            case = models.case(name, req["size"], req["dtype"])
            inputs = case.args()
            warm = timed_call(
                mj.optimize(case.fn, config=config, cache_dir=req["caches"][name]), inputs
            )
            out[name] = (warm, timed_call(jax.jit(case.fn), inputs))
    print(json.dumps(out))
    return 0


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks --models",
        description="jax.jit(f) against mirage_jax.optimize(f) on the model zoo",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"tiny configurations, 5 rounds, a {QUICK_BUDGET_S:g} s search "
        f"budget per region (minutes for the whole zoo)",
    )
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "models"),
        help="directory for results.md, results.json and results.png "
        "(default: benchmarks/out/models)",
    )
    parser.add_argument(
        "--runs", type=int, default=None, help="timed rounds per case (default 20, 5 with --quick)"
    )
    parser.add_argument("--dtype", choices=sorted(models.DTYPES), default="f32")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="search seconds per region, for every region (default: the "
        f"package's own per-region limits; {QUICK_BUDGET_S:g} with "
        f"--quick)",
    )
    parser.add_argument("--child-warm", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_warm is not None:
        return args
    args.size = "tiny" if args.quick else "small"
    if args.runs is None:
        args.runs = 5 if args.quick else 20
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if args.budget is None and args.quick:
        args.budget = QUICK_BUDGET_S
    if args.budget is not None and args.budget <= 0:
        parser.error(f"--budget must be positive, got {args.budget}")
    known = models.case_names(args.size)
    args.only = [s for s in args.only.split(",") if s]
    unknown = [s for s in args.only if s not in known]
    if unknown:
        parser.error(
            f"--only: unknown case(s) {', '.join(unknown)}; known at "
            f"{'--quick' if args.quick else 'full'} size: {', '.join(known)}"
        )
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.child_warm is not None:
        return child_warm(args.child_warm)
    command = "python -m benchmarks --models " + shlex.join(argv)
    missing = models.unavailable()
    names = args.only or models.case_names(args.size)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    rows = []
    calibration_s, calibration = calibrate()
    machine = roofline.measure(quick=args.quick)
    if args.dtype == "bf16":  # the generated kernels multiply bfloat16 on AMX tiles, if any
        machine = dataclasses.replace(machine, flops=max(machine.flops, bf16_flops_per_s()))
    print(
        f"roofline: {machine.bandwidth / 1e9:.1f} GB/s read, {machine.flops / 1e9:.0f} GFLOP/s "
        f"matmul",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="mj_zoo_") as root:
        caches = {}
        for i, name in enumerate(names, 1):
            caches[name] = os.path.join(root, name)
            print(f"[{i}/{len(names)}] {name} ({args.size}, {args.dtype})", flush=True)
            start = time.perf_counter()
            row = bench_case(name, args, caches[name], machine)
            rows.append(row)
            print(
                f"    xla {row['xla_ms']:.3f} ms, mirage_jax {row['mirage_ms']:.3f} ms "
                f"({row['speedup']:.2f}x); regions {row['regions']} found, "
                f"{row['converted_regions']} convert, {row['kernel_regions']} kernels, "
                f"{row['kept_end_to_end']} end to end; matmuls in converting regions "
                f"{row['matmuls_converting']}/{row['matmuls']}; first call: jit "
                f"{row['jit_first_call_s']:.1f} s, cold {row['cold_s']:.1f} s; err "
                f"{row['max_rel_err']:.1e}, padded {row['padded_max_rel_err']:.1e} "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
            print(f"    {summarize(rankings_of(row)).line()}", flush=True)
            for failure in row["failures"]:
                print(f"    FAILURE: {failure}", flush=True)
        print("warm first calls in a new process ...", flush=True)
        warm = warm_in_new_process(names, args, caches)
    for row in rows:
        row["warm_s"], row["warm_jit_first_call_s"] = warm[row["name"]]
        row["warm_over_jit_s"] = row["warm_s"] - row["warm_jit_first_call_s"]
    result = dict(
        command=command,
        size=args.size,
        dtype=args.dtype,
        runs=args.runs,
        quick=args.quick,
        budget_s=args.budget,
        tolerance=TOLERANCE[args.dtype],
        unavailable=missing,
        machine=dict(
            cpu=_cpu_name(),
            cores=os.cpu_count(),
            jax=jax.__version__,
            device=str(jax.devices()[0]),
            load_before=load_before,
            load_after=os.getloadavg()[0],
        ),
        cases=rows,
        geomean_speedup=report.geomean([r["speedup"] for r in rows]),
        calibration=calibration,
        calibration_s=calibration_s,
        roofline=dict(bandwidth=machine.bandwidth, flops=machine.flops),
        ranking=summarize([r for row in rows for r in rankings_of(row)]).to_json(),
    )
    table = models_report.markdown(result)
    (out / "results.md").write_text(table)
    report.write_json(result, out / "results.json")
    models_report.write_chart(result, out / "results.png")
    print()
    print(table)
    print(summarize([r for row in rows for r in rankings_of(row)]).line() + " (all regions)")
    print(f"wrote {out / 'results.md'}, {out / 'results.json'}, {out / 'results.png'}")
    return 0 if all(r["correct"] for r in rows) else 1


def rankings_of(row: dict) -> list:
    return [Ranking(**r) for r in row["rankings"]]


def calibrate() -> tuple[float, str]:
    """(seconds, what the CPU cost model ranks with): measured here, once per machine,
    before any case, so that no case's cold first call carries it."""
    if not calibration_cache.enabled():
        return 0.0, f"presets (${calibration_cache.ENV}=0)"
    start = time.perf_counter()
    found = calibration_cache.load_or_measure()
    seconds = time.perf_counter() - start
    print(f"cost model calibration ({seconds:.1f} s, once per machine): {found.summary()}")
    return seconds, found.summary()


def _cpu_name() -> str:
    from run import cpu_name

    return cpu_name()


if __name__ == "__main__":
    sys.exit(main())

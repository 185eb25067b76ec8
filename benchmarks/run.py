"""The benchmark suite: jax.jit(f) against mirage_jax.optimize(f).

For every program of benchmarks/programs.py, at the paper's shapes (or small ones with
--quick), on device-resident arrays:
  - wall time of jax.jit(f) and of mj.optimize(f), measured in one process, alternating call
    by call, the median of --runs after warm-up, and their ratio; and the ratio again with
    jax.jit(mj.optimize(f)) (optimize's per-call work traced away; the difference between
    the two also shows the run-to-run noise);
  - the first call of mj.optimize(f) with an empty temporary cache (cold: trace, search,
    compile, time, check) and of a fresh mj.optimize(f) object on the same cache (warm);
  - the fraction of the machine's roofline reached: bandwidth and matmul flop/s are measured
    on the same device in the same run (benchmarks/roofline.py);
  - the largest error of mj.optimize(f) against jax.jit(f) (the run fails if it is too large).
It writes results.md, results.json and results.png to --out and prints the table.

    python benchmarks/run.py [--quick] [--backend cpu|cuda] [--out DIR] [--only a,b] [--runs N]
    python -m benchmarks ...          (the same, from the repository root)
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import report
import roofline
from programs import PROGRAMS
from timing import alternating_medians, timed_call

import mirage_jax as mj
from mirage_jax.runtime import toolchain

# float32 throughout, checked against jax.jit(f) at "highest" matmul precision (a float32
# reference on every backend), normwise (of max |output|). Kernels and XLA sum in different
# orders: 1e-4. On a GPU at jax's default precision XLA's own dots, and the kernels' where
# allowed, round their operands to TF32 (10 mantissa bits): TF32_TOLERANCE.
TOLERANCE = 1e-4
TF32_TOLERANCE = 2.0**-9


def tolerance_for(backend: str) -> float:
    """The error allowed against the float32 reference: TF32's where jax's matmul precision
    lets XLA (and the kernels) use it on the GPU, else float32's."""
    if backend != "cuda":
        return TOLERANCE
    return TF32_TOLERANCE if toolchain.tf32_allowed() else TOLERANCE


class BackendUnavailable(RuntimeError):
    pass


def device_for(backend: str):
    """The jax device the arrays live on for `backend`; BackendUnavailable names why not."""
    if backend == "cpu":
        return jax.devices("cpu")[0]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as e:
        raise BackendUnavailable(
            f"--backend cuda: jax sees no GPU on this machine ({e}); run with --backend cpu, "
            f"or on a machine with an NVIDIA GPU and jax[cuda] installed"
        ) from None
    return gpus[0]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def regions_of(optimized, inputs) -> list[tuple[str, str]]:
    """(chosen: "kernel" or "xla", reason) of each region optimize found for these inputs."""
    return [(r.chosen, r.reason) for r in optimized.regions(*inputs)]


def normwise_error(got, want) -> float:
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def bench_program(
    program, args, machine: roofline.Roofline, quick: bool, backend: str, device
) -> dict:
    inputs = program.inputs(quick, device=device)
    xla = jax.jit(program.fn)
    jit_first_s = timed_call(xla, inputs)
    with (
        tempfile.TemporaryDirectory(prefix="mj_bench_") as cache_dir,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        optimized = mj.optimize(program.fn, backend=backend, cache_dir=cache_dir)
        cold_s = timed_call(optimized, inputs)
        # a fresh object: no in-memory specialization, only the disk cache
        warm = mj.optimize(program.fn, backend=backend, cache_dir=cache_dir)
        warm_s = timed_call(warm, inputs)
    backend_warnings = sorted({str(w.message) for w in caught if "region at" not in str(w.message)})
    with jax.default_matmul_precision("highest"):
        want = jax.jit(program.fn)(*inputs)
    error = normwise_error(optimized(*inputs), want)
    tolerance = tolerance_for(backend)
    xla_s, mj_s = alternating_medians(xla, optimized, inputs, args.runs)
    # a second measurement, called under jax.jit: optimize's own per-call work traced away
    xla_again_s, jitted_mj_s = alternating_medians(xla, jax.jit(optimized), inputs, args.runs)
    nbytes = roofline.compulsory_bytes(inputs, want)
    flops = roofline.count_flops(program.fn, inputs)
    bound = machine.time_bound(nbytes, flops)
    regions = regions_of(optimized, inputs)
    # a region's kernel runs only if the rewritten program also beat jax.jit of the whole
    # function (optimize's final check)
    runs_kernels = bool(optimized.uses_kernels(*inputs))
    notes = [f"region left to XLA: {reason}" for chosen, reason in regions if chosen == "xla"]
    notes += backend_warnings
    if not regions:
        notes.append("no region with a matmul or a reduction: plain JAX")
    if any(c == "kernel" for c, _ in regions) and not runs_kernels:
        notes.append(
            "the rewritten program did not beat jax.jit of the whole function: it runs as plain JAX"
        )
    return dict(
        name=program.name,
        description=program.description,
        shapes=[list(s) for s in program.arg_shapes(quick)],
        bytes=nbytes,
        flops=flops,
        xla_ms=xla_s * 1e3,
        mirage_ms=mj_s * 1e3,
        speedup=xla_s / mj_s,
        jit_of_mirage_ms=jitted_mj_s * 1e3,
        jit_of_mirage_speedup=xla_again_s / jitted_mj_s,
        jit_first_call_s=jit_first_s,
        cold_s=cold_s,
        warm_s=warm_s,
        xla_roofline=bound / xla_s,
        mirage_roofline=bound / mj_s,
        xla_GBps=nbytes / xla_s / 1e9,
        mirage_GBps=nbytes / mj_s / 1e9,
        xla_GFLOPs=flops / xla_s / 1e9,
        mirage_GFLOPs=flops / mj_s / 1e9,
        mirage_bandwidth_fraction=nbytes / mj_s / machine.bandwidth,
        mirage_flops_fraction=flops / mj_s / machine.flops,
        regions=len(regions),
        kernel_regions=sum(c == "kernel" for c, _ in regions),
        runs_kernels=runs_kernels,
        max_rel_err=error,
        tolerance=tolerance,
        correct=error <= tolerance,
        notes=notes,
        load=os.getloadavg()[0],
    )


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python benchmarks/run.py",
        description="jax.jit(f) against mirage_jax.optimize(f) on the paper's programs",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small shapes (seconds per program), for tests and smoke runs",
    )
    parser.add_argument(
        "--backend",
        choices=("cpu", "cuda"),
        default="cpu",
        help="mj.optimize's backend and the device the arrays live on",
    )
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"),
        help="directory for results.md, results.json and results.png (default: benchmarks/out)",
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated program names (default: all): " + ", ".join(p.name for p in PROGRAMS),
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="timed rounds per program (default 50, 10 with --quick)",
    )
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 10 if args.quick else 50
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    known = {p.name for p in PROGRAMS}
    args.only = [s for s in args.only.split(",") if s]
    unknown = [s for s in args.only if s not in known]
    if unknown:
        parser.error(
            f"--only: unknown program(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = "python benchmarks/run.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    try:
        device = device_for(args.backend)
    except BackendUnavailable as e:
        print(f"benchmark: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    programs = [p for p in PROGRAMS if not args.only or p.name in args.only]
    load_before = os.getloadavg()[0]
    print(f"measuring the roofline on {device} ...", flush=True)
    machine = roofline.measure(device, quick=args.quick)
    print(f"  {machine.bandwidth / 1e9:.1f} GB/s, {machine.flops / 1e9:.0f} GFLOP/s", flush=True)
    rows = []
    for i, program in enumerate(programs, 1):
        shapes = " ".join("[" + ",".join(map(str, s)) + "]" for s in program.arg_shapes(args.quick))
        print(f"[{i}/{len(programs)}] {program.name}: {program.description}, {shapes}", flush=True)
        start = time.perf_counter()
        row = bench_program(program, args, machine, args.quick, args.backend, device)
        rows.append(row)
        print(
            f"    xla {row['xla_ms']:.3f} ms, mirage_jax {row['mirage_ms']:.3f} ms "
            f"({row['speedup']:.2f}x), {row['kernel_regions']}/{row['regions']} regions as "
            f"kernels{'' if row['runs_kernels'] else ' (program runs as plain JAX)'}, "
            f"cold {row['cold_s']:.1f} s, warm {row['warm_s']:.2f} s, "
            f"err {row['max_rel_err']:.1e}{'' if row['correct'] else ' WRONG'} "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
        for note in row["notes"]:
            print(f"    note: {note}", flush=True)
    result = dict(
        command=command,
        backend=args.backend,
        quick=args.quick,
        runs=args.runs,
        tolerance=tolerance_for(args.backend),
        machine=dict(
            cpu=cpu_name(),
            cores=os.cpu_count(),
            jax=jax.__version__,
            device=str(device),
            platform=device.platform,
            bandwidth_GBps=machine.bandwidth / 1e9,
            gflops=machine.flops / 1e9,
            read_MiB=machine.read_bytes // 2**20,
            matmul_n=machine.matmul_n,
            load_before=load_before,
            load_after=os.getloadavg()[0],
        ),
        programs=rows,
        geomean_speedup=report.geomean([r["speedup"] for r in rows]),
    )
    table = report.markdown(result)
    (out / "results.md").write_text(table)
    report.write_json(result, out / "results.json")
    report.write_chart(result, out / "results.png")
    print()
    print(table)
    print(f"wrote {out / 'results.md'}, {out / 'results.json'}, {out / 'results.png'}")
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

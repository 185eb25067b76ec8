"""The paper's programs at the paper's shapes on the GPU, in bfloat16 and float32: each fused
μGraph's kernels (mj.compile(fused, "cuda")) against XLA's code for the reference program,
timed side by side in one process (alternating calls, medians), checked against XLA at
"highest" precision, with each kernel's static roofline estimate (explain's) beside the
measured time. Writes one JSON and one markdown table.

    python tests/gpu/paper_timing.py --out DIR [--runs N] [--only a,b] [--dtypes bfloat16]

Exit status: 0 when every program ran and was within tolerance, 1 when one was wrong or
failed, 2 when no GPU is visible (nothing can run: loud, not a skip).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from timing import alternating_medians  # noqa: E402

import mirage_jax as mj  # noqa: E402
from mirage_jax import _core  # noqa: E402
from mirage_jax.ir.paper_graphs import PROGRAMS  # noqa: E402
from mirage_jax.runtime import toolchain  # noqa: E402


def tolerance(dtype: str, tf32: bool) -> float:
    """Normwise, against XLA at highest precision: a bf16 reference rounds after every op
    and the kernel once (a few roundings: 4 eps); a float32 kernel sums in another order
    (1e-4), or with TF32 allowed rounds its matmul operands to 10 mantissa bits first."""
    if dtype != "float32":
        return 4 * float(jnp.finfo(dtype).eps)
    return 2.0**-9 if tf32 else 1e-4


def gpu_target(device) -> str:
    kind = str(getattr(device, "device_kind", "")).lower()
    for name in ("h200", "h100", "a100"):
        if name in kind:
            return name
    return "h100"


def normwise(got, want) -> float:
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def estimates(fused, target: str, tf32: bool) -> list[dict]:
    limit = toolchain.shared_memory_limit(toolchain.target_archs())
    return [
        _core.cuda_kernel_estimate(op.block_graph._core, limit, tf32, target)
        for op in fused.ops
        if op.kind == "customized"
    ]


# Calls queued per timed round for the device-bound figure (timed_call's depth).
QUEUED = 100


def run_one(name: str, dtype: str, runs: int, device, target: str) -> dict:
    program = PROGRAMS[name]
    reference, fused = program.build(dtype=dtype)
    tf32 = dtype == "float32" and toolchain.tf32_allowed()
    rng = np.random.default_rng(0)
    inputs = [
        jax.device_put(jnp.asarray(rng.standard_normal(t.shape), t.dtype), device)
        for t in fused.inputs
    ]
    start = time.perf_counter()
    kernels = jax.jit(mj.compile(fused, backend="cuda"))
    got = jax.block_until_ready(kernels(*inputs))
    compile_s = time.perf_counter() - start
    xla = jax.jit(mj.compile(reference, backend="cuda"))
    with jax.default_matmul_precision("highest"):
        want = jax.block_until_ready(jax.jit(mj.compile(reference, backend="cuda"))(*inputs))
    error = max(normwise(g, w) for g, w in zip(got, want))
    xla_s, mj_s = alternating_medians(xla, kernels, inputs, runs)
    xla_q, mj_q = alternating_medians(xla, kernels, inputs, runs, depth=QUEUED)
    plans = estimates(fused, target, tf32)
    roofline_s = sum(p["roofline_s"] for p in plans)
    return dict(
        program=name,
        dtype=dtype,
        tf32=tf32,
        shapes=[list(t.shape) for t in fused.inputs],
        xla_us=xla_s * 1e6,
        mirage_us=mj_s * 1e6,
        speedup=xla_s / mj_s,
        xla_queued_us=xla_q * 1e6,
        mirage_queued_us=mj_q * 1e6,
        queued_speedup=xla_q / mj_q,
        compile_s=compile_s,
        max_rel_err=error,
        tolerance=tolerance(dtype, tf32),
        correct=error <= tolerance(dtype, tf32),
        roofline_us=roofline_s * 1e6,
        measured_share=roofline_s / mj_q,
        estimated_share=[p["share"] for p in plans],
        kernels=[p["text"] for p in plans],
    )


def markdown(rows: list[dict], device: str) -> str:
    lines = [
        f"# Paper programs on {device}",
        "",
        f"One call and its wait (µs), and per call with {QUEUED} queued (µs: the device's "
        "time once dispatch overlaps it); the measured share is the roofline's over the "
        "queued time.",
        "",
        "| program | dtype | XLA µs | mirage µs | speedup | XLA queued | mirage queued | "
        "queued speedup | roofline µs | measured share | estimated share | error | ok |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['program']} | {r['dtype']} | | | | | | | | | | | FAILED: "
                f"{r['error'].splitlines()[0][:80]} |"
            )
            continue
        est = ", ".join(f"{s:.0%}" for s in r["estimated_share"])
        lines.append(
            f"| {r['program']} | {r['dtype']}{' (tf32)' if r['tf32'] else ''} | "
            f"{r['xla_us']:.1f} | {r['mirage_us']:.1f} | {r['speedup']:.2f}x | "
            f"{r['xla_queued_us']:.1f} | {r['mirage_queued_us']:.1f} | "
            f"{r['queued_speedup']:.2f}x | "
            f"{r['roofline_us']:.1f} | {r['measured_share']:.0%} | {est} | "
            f"{r['max_rel_err']:.1e} | {'yes' if r['correct'] else 'WRONG'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", default="")
    parser.add_argument("--dtypes", default="bfloat16,float32")
    args = parser.parse_args(argv)
    try:
        device = jax.devices("gpu")[0]
    except RuntimeError as e:
        print(f"paper_timing: no GPU visible to jax ({e})", file=sys.stderr)
        return 2
    target = gpu_target(device)
    names = [n for n in sorted(PROGRAMS) if not args.only or n in args.only.split(",")]
    rows = []
    for name in names:
        for dtype in args.dtypes.split(","):
            try:
                row = run_one(name, dtype, args.runs, device, target)
                print(
                    f"{name} {dtype}: xla {row['xla_us']:.1f} us, mirage "
                    f"{row['mirage_us']:.1f} us ({row['speedup']:.2f}x); queued xla "
                    f"{row['xla_queued_us']:.1f} us, mirage {row['mirage_queued_us']:.1f} us "
                    f"({row['queued_speedup']:.2f}x), err "
                    f"{row['max_rel_err']:.1e}{'' if row['correct'] else ' WRONG'}",
                    flush=True,
                )
            except Exception:
                row = dict(program=name, dtype=dtype, error=traceback.format_exc())
                print(f"{name} {dtype}: FAILED\n{row['error']}", flush=True)
            rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(
        device=str(device),
        device_kind=getattr(device, "device_kind", ""),
        target=target,
        archs=list(toolchain.target_archs()),
        jax=jax.__version__,
        runs=args.runs,
        rows=rows,
    )
    (out / "paper_timing.json").write_text(json.dumps(result, indent=1))
    (out / "paper_timing.md").write_text(markdown(rows, str(device)))
    print(markdown(rows, str(device)))
    return 0 if all(r.get("correct") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

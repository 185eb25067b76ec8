"""The benchmark's outputs: a markdown table, a JSON file and a PNG bar chart."""

from __future__ import annotations

import json
import math
from pathlib import Path


def geomean(values) -> float:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def _regions(row) -> str:
    if row["regions"] == 0:
        return "none"
    text = f"{row['kernel_regions']}/{row['regions']} kernel"
    if row["kernel_regions"] and not row.get("runs_kernels", True):
        text += " (not kept: plain JAX)"
    return text


def markdown(result: dict) -> str:
    m = result["machine"]
    lines = [
        f"Machine: {m['cpu']} ({m['cores']} cores), jax {m['jax']} on {m['device']}; "
        f"measured roofline {m['bandwidth_GBps']:.1f} GB/s (jitted read of "
        f"{m['read_MiB']} MiB), {m['gflops']:.0f} GFLOP/s (f32 matmul {m['matmul_n']}³); "
        f"load average {m['load_before']:.2f} before, {m['load_after']:.2f} after.",
        f"Backend {result['backend']}, {'quick' if result['quick'] else 'paper'} shapes, "
        f"float32, device arrays, jax.jit and mirage_jax alternating in one process, "
        f"medians of {result['runs']} after warm-up.",
        "",
        "| program | regions | XLA ms | mirage_jax ms | speedup | under jit "
        "| roofline XLA → mj | GB/s mj | GFLOP/s mj | search+compile cold s | warm s "
        "| max rel err |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["programs"]:
        lines.append(
            f"| {r['name']} | {_regions(r)} | {r['xla_ms']:.3f} | {r['mirage_ms']:.3f} "
            f"| {r['speedup']:.2f}× | {r['jit_of_mirage_speedup']:.2f}× "
            f"| {r['xla_roofline']:.0%} → {r['mirage_roofline']:.0%} "
            f"| {r['mirage_GBps']:.1f} | {r['mirage_GFLOPs']:.1f} | {r['cold_s']:.1f} "
            f"| {r['warm_s']:.2f} | {r['max_rel_err']:.1e} |"
        )
    lines += [
        "",
        f"Geometric mean speedup: {result['geomean_speedup']:.2f}× over "
        f"{len(result['programs'])} programs.",
    ]
    lines += [
        "",
        '"under jit": a second measurement, with mj.optimize(f) called under '
        "jax.jit; the two speedup columns differ by optimize's per-call work and by "
        "run-to-run noise.",
    ]
    # The benchmark loads the cores itself, so only the load before it started tells whether
    # other processes were running.
    if m["load_before"] > m["cores"] / 2:
        lines += [
            "",
            f"**The machine was busy** (load average {m['load_before']:.1f} on "
            f"{m['cores']} cores before the run): other processes shared the cores, "
            f"so these ratios can be off by tens of percent.",
        ]
    notes = [(r["name"], n) for r in result["programs"] for n in r["notes"]]
    if notes:
        lines += ["", "Notes (regions left to XLA, and why):", ""]
        lines += [f"- {name}: {note}" for name, note in notes]
    wrong = [r["name"] for r in result["programs"] if not r["correct"]]
    if wrong:
        lines += [
            "",
            f"**WRONG RESULTS** (error above {result['tolerance']:g}): " + ", ".join(wrong),
        ]
    lines += ["", f"Command: `{result['command']}`"]
    return "\n".join(lines) + "\n"


def write_json(result: dict, path: Path) -> None:
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")


def write_chart(result: dict, path: Path) -> None:
    """Two panels: the speedup of each program, and the fraction of the roofline reached by
    XLA and by mirage_jax."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["programs"]
    names = [r["name"] for r in rows]
    x = range(len(rows))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    speedups = [r["speedup"] for r in rows]
    colors = ["tab:green" if s >= 1 else "tab:red" for s in speedups]
    left.bar(x, speedups, color=colors)
    left.axhline(1.0, color="black", linewidth=0.8)
    left.set_ylabel("speedup over jax.jit (×)")
    left.set_title(f"mirage_jax vs jax.jit (geomean {result['geomean_speedup']:.2f}×)")
    for i, s in enumerate(speedups):
        left.annotate(f"{s:.2f}", (i, s), ha="center", va="bottom", fontsize=8)
    width = 0.4
    right.bar(
        [i - width / 2 for i in x],
        [100 * r["xla_roofline"] for r in rows],
        width,
        label="jax.jit (XLA)",
        color="tab:gray",
    )
    right.bar(
        [i + width / 2 for i in x],
        [100 * r["mirage_roofline"] for r in rows],
        width,
        label="mirage_jax",
        color="tab:blue",
    )
    right.set_ylabel("% of the measured roofline")
    m = result["machine"]
    right.set_title(f"roofline: {m['bandwidth_GBps']:.0f} GB/s, {m['gflops']:.0f} GFLOP/s")
    right.legend()
    for ax in (left, right):
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    fig.suptitle(
        f"{'quick' if result['quick'] else 'paper'} shapes, backend "
        f"{result['backend']}, {m['cpu']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

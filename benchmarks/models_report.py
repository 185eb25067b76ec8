"""The model-zoo benchmark's outputs (benchmarks/models_run.py): a markdown table and a PNG
chart; the JSON is report.write_json's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


def _regions(r) -> str:
    return (
        f"{r['regions']} / {r['converted_regions']} / {r['kernel_regions']} / "
        f"{r['kept_end_to_end']}"
    )


def _error(err: float, nonfinite: int, differs: int = 0) -> str:
    """The normwise error, or what is worse: values not finite where jax.jit's are, integer
    outputs (sampled tokens) not equal to jax.jit's."""
    worse = [f"NaN/Inf ×{nonfinite}"] * bool(nonfinite) + [f"differs ×{differs}"] * bool(differs)
    if not worse:
        return f"{err:.1e}"
    return f"**{', '.join(worse)}** ({err:.1e})"


def _errors(r, prefix: str) -> str:
    """The error column `prefix` names ("", "padded_", "kernels_kept_", ...)."""
    if prefix.startswith("kernels_kept") and not r["kernels_kept_uses_kernels"]:
        return "(no kernel)"
    return _error(r[f"{prefix}max_rel_err"], r[f"{prefix}nonfinite"], r.get(f"{prefix}differs", 0))


def _ceiling(r) -> str:
    """The highest speedup the case allows ("–": a loop, or results written before it was)."""
    return f"{r['ceiling']:.2f}×" if r.get("ceiling") is not None else "–"


def markdown(result: dict) -> str:
    m = result["machine"]
    budget = (
        "the package's per-region search limits"
        if result["budget_s"] is None
        else f"a {result['budget_s']:g} s search budget per region"
    )
    lines = [
        f"Machine: {m['cpu']} ({m['cores']} cores), jax {m['jax']} on {m['device']}; load "
        f"average {m['load_before']:.2f} before, {m['load_after']:.2f} after.",
        f"Zoo at {result['size']} size, {result['dtype']}, {budget}; device arrays, jax.jit "
        f"and mirage_jax alternating in one process, medians of {result['runs']} after "
        f"warm-up.",
        "",
        "| case | regions: found / convert / kernel / end to end | matmuls in converting "
        "regions | XLA ms | mirage_jax ms | speedup | roofline ceiling | first call s: "
        "jax.jit | cold "
        "| warm (new process) | warm − jax.jit | error | padded error | kernels kept: error "
        "| padded error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["cases"]:
        lines.append(
            f"| {r['name']} | {_regions(r)} | {r['matmuls_converting']}/{r['matmuls']} "
            f"| {r['xla_ms']:.3f} | {r['mirage_ms']:.3f} | {r['speedup']:.2f}× "
            f"| {_ceiling(r)} "
            f"| {r['jit_first_call_s']:.1f} | {r['cold_s']:.1f} | {r['warm_s']:.1f} "
            f"| {r['warm_over_jit_s']:+.1f} | "
            + " | ".join(
                _errors(r, p) for p in ("", "padded_", "kernels_kept_", "kernels_kept_padded_")
            )
            + " |"
        )
    lines += [
        "",
        f"Geometric mean speedup: {result['geomean_speedup']:.2f}× over "
        f"{len(result['cases'])} cases.",
    ]
    ranked = result.get("ranking")
    if ranked and ranked["ranked"]:
        lines += [
            "",
            f"Cost model ({result.get('calibration', '?')}), over the {ranked['ranked']} "
            f"regions that timed candidates: mean Spearman {ranked['mean_spearman']:.2f} "
            f"({ranked['with_spearman']} regions with 3 or more), fastest measured in its top "
            f"4 in {ranked['fastest_in_top4']}, its first choice at "
            f"{ranked['regret_geomean']:.2f}× the fastest's time (geometric mean).",
        ]
    lines += [
        "",
        "Regions: found by the partitioner / converted to a μGraph / a kernel beat "
        "XLA on the region / kernels run in the end (the rewritten program also "
        "beat jax.jit of the whole function). Roofline ceiling: jax.jit's time over "
        "the least any program could take (inputs read and outputs written once at the "
        "bandwidth of a large read measured in this run, or its flops at a large matmul's "
        "rate; in bfloat16 the faster of XLA's float32 matmul and a generated bfloat16 "
        "product, which the AMX tiles run several times faster where the CPU has them): "
        "no speedup above it is possible while the inputs come from memory. The cases call "
        "with the same weights every time, so on a machine whose last-level cache holds them "
        "(the small models' float32 inputs are 55-170 MB, caches included) XLA can run "
        "under the bound and a row can beat its ceiling. First calls: jax.jit's trace and "
        "compile in this process; mirage_jax's with an empty cache (cold); in a new "
        "process on the cold call's cache (warm), next to jax.jit's first call in "
        "that process (warm − jax.jit). Errors: normwise per output against "
        'jax.jit, on a normal and on a padded batch; "kernels kept": the same cache '
        "with every checked kernel run whatever the timing "
        "($MIRAGE_JAX_KEEP_KERNELS=1).",
    ]
    if m["load_before"] > m["cores"] / 2:
        lines += [
            "",
            f"**The machine was busy** (load average {m['load_before']:.1f} on "
            f"{m['cores']} cores before the run): other processes shared the cores, "
            f"so times and ratios can be off by tens of percent.",
        ]
    failed = [r for r in result["cases"] if not r["correct"]]
    if failed:
        lines += [
            "",
            f"**FAILURES** (error above {result['tolerance']:g}, or not finite where jax.jit is):",
            "",
        ]
        lines += [f"- **{r['name']}**: {f}" for r in failed for f in r["failures"]]
    reasons = Counter()
    for r in result["cases"]:
        reasons.update(r["coverage_reasons"])
    if reasons:
        lines += [
            "",
            "Why matmuls are not in a converting region (count over all cases; "
            "`python benchmarks/models/coverage.py` lists each one):",
            "",
        ]
        lines += [f"- {n}× {reason}" for reason, n in reasons.most_common()]
    fallbacks = Counter()
    for r in result["cases"]:
        fallbacks.update(r["fallbacks"])
    if fallbacks:
        lines += ["", "Regions left to XLA, and why (count over all cases):", ""]
        lines += [f"- {n}× {reason}" for reason, n in fallbacks.most_common()]
    for model, why in result["unavailable"].items():
        lines += ["", f"Not run: {model} ({why}; `pip install '.[models]'`)."]
    lines += ["", f"Command: `{result['command']}`"]
    return "\n".join(lines) + "\n"


def write_chart(result: dict, path: Path) -> None:
    """Two panels: the speedup of each case, and its first-call times (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["cases"]
    names = [r["name"] for r in rows]
    x = range(len(rows))
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    speedups = [r["speedup"] for r in rows]
    colors = [
        "tab:red" if not r["correct"] else "tab:green" if r["speedup"] >= 1 else "tab:orange"
        for r in rows
    ]
    left.bar(x, speedups, color=colors)
    left.axhline(1.0, color="black", linewidth=0.8)
    left.set_ylabel("speedup over jax.jit (×)")
    left.set_title(
        f"mirage_jax vs jax.jit (geomean {result['geomean_speedup']:.2f}×; red: wrong results)"
    )
    for i, s in enumerate(speedups):
        left.annotate(f"{s:.2f}", (i, s), ha="center", va="bottom", fontsize=8)
    width = 0.27
    for k, (key, label, color) in enumerate(
        (
            ("jit_first_call_s", "jax.jit", "tab:gray"),
            ("cold_s", "mirage_jax cold", "tab:blue"),
            ("warm_s", "mirage_jax warm (new process)", "tab:cyan"),
        )
    ):
        right.bar(
            [i + (k - 1) * width for i in x],
            [r[key] for r in rows],
            width,
            label=label,
            color=color,
        )
    right.set_yscale("log")
    right.set_ylabel("first call (s)")
    right.set_title("first-call time")
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    m = result["machine"]
    fig.suptitle(f"model zoo, {result['size']} size, {result['dtype']}, {m['cpu']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Search reach: what `mj.search` finds on the paper's programs with default limits.

For each program at the paper's shapes, `mj.search(reference, SearchConfig(...))` runs once,
cold, with the limits of `SearchConfig()` (only the preset, the budget and the threads set),
and the row says whether the paper's own μGraph (mirage_jax/ir/paper_graphs.py, matched by
canonical hash) is among the candidates and at which rank of the cost model's order, how
many kernels the first candidate has, the search's wall time and states explored. The same
row with `deepen=False` shows what the depth-first search at those limits reaches on its own.

    python benchmarks/search_reach.py [--only lora,...] [--budget 60] [--no-compare]

The paper's μGraph is one fused form; a search may rank another fused form first (another
grid, another loop range), so "rank of the paper's form" is a floor on what was reached, not
the quality of the first candidate, which benchmarks/superoptimize.py times.
"""

from __future__ import annotations

import argparse
import json
import time

import mirage_jax as mj
from mirage_jax.ir import paper_graphs as pg

# (row name, builder of (reference, the paper's μGraph), preset)
CASES = [
    ("rmsnorm_linear_bs8", lambda: pg.rmsnorm_linear(batch=8), "mlp"),
    ("rmsnorm_linear_bs1", lambda: pg.rmsnorm_linear(batch=1), "mlp"),
    ("gated_mlp", pg.gated_mlp, "mlp"),
    ("ntrans", pg.ntrans, "mlp"),
    ("lora", pg.lora, "lora"),
    ("gqa_prefill", pg.gqa_prefill, "attention"),
    ("gqa_decode", pg.gqa_decode, "attention"),
    ("qknorm_gqa", pg.qknorm_gqa, "attention"),
]


def kernels(graph: mj.KernelGraph) -> int:
    """Kernel-level ops: each customized op and each library op is one kernel launch."""
    return len(graph.ops)


def reach(reference, paper, config: mj.SearchConfig) -> dict:
    start = time.perf_counter()
    result = mj.search(reference, config, progress=False)
    seconds = time.perf_counter() - start
    hashes = [g.hash() for g in result]
    paper_hash = paper.hash()
    return dict(
        candidates=len(result),
        paper_rank=hashes.index(paper_hash) + 1 if paper_hash in hashes else None,
        first_kernels=kernels(result.candidates[0]) if len(result) else None,
        seconds=seconds,
        states=result.stats.states_explored,
        reason=result.reason,
    )


def cell(row: dict) -> str:
    rank = "not found" if row["paper_rank"] is None else f"rank {row['paper_rank']}"
    stop = f", {row['reason']}" if row["reason"] else ""
    return f"{rank} of {row['candidates']}, {row['seconds']:.1f} s, {row['states']:,} states{stop}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated row names")
    parser.add_argument("--budget", type=float, default=60.0, help="time_budget_s per search")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-compare", action="store_true", help="skip the deepen=False rows")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args()
    only = {s for s in args.only.split(",") if s}
    rows = []
    for name, build, preset in CASES:
        if only and name not in only:
            continue
        reference, paper = build()
        config = mj.SearchConfig(preset=preset, time_budget_s=args.budget, threads=args.threads)
        row = dict(program=name, preset=preset, deepened=reach(reference, paper, config))
        if not args.no_compare:
            flat = mj.SearchConfig(
                preset=preset, time_budget_s=args.budget, threads=args.threads, deepen=False
            )
            row["depth_first"] = reach(reference, paper, flat)
        rows.append(row)
        print(f"  {name}: deepened {cell(row['deepened'])}", flush=True)
        if "depth_first" in row:
            print(f"  {name}: depth first {cell(row['depth_first'])}", flush=True)
    defaults = mj.SearchConfig()
    print(
        f"\nLimits of SearchConfig(): {defaults.max_kernel_ops} kernel ops, "
        f"{defaults.max_block_ops} block ops, {defaults.max_block_graphs} block graph(s); "
        f"budget {args.budget:g} s, {args.threads} threads\n"
    )
    compare = not args.no_compare
    print(
        "| program | preset | paper's μGraph, deepened | first candidate's kernels |"
        + (" depth first at the same limits |" if compare else "")
    )
    print("|---|---|---|---|" + ("---|" if compare else ""))
    for r in rows:
        line = (
            f"| {r['program']} | {r['preset']} | {cell(r['deepened'])} "
            f"| {r['deepened']['first_kernels']} |"
        )
        if compare:
            line += f" {cell(r['depth_first'])} |"
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

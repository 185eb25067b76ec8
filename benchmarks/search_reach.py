"""Search reach: what `mj.search` finds on the paper's programs with default limits.

The paper's programs, then programs of real models beyond them (mirage_jax/ir/model_graphs.py:
LayerNorm + Linear, the SwiGLU MLP with its down projection, attention under an additive
mask), whose hand-written best known form stands in for the paper's μGraph.

For each program at the paper's shapes, `mj.search(reference, SearchConfig(...))` runs once,
cold, with the limits and the "auto" preset of `SearchConfig()` (the budget and the threads
set),
and the row gives the rank, in the cost model's order, of the first candidate fused as far as
the paper's μGraph (mirage_jax/ir/paper_graphs.py): no more kernels than it has. It also
says whether the paper's own μGraph is among the candidates (by canonical hash), or its
form (the same kernel-level ops and the same block ops in each kernel, whatever the grids,
maps and loop ranges); how
many kernels the first candidate has, the search's wall time and states explored, and when
its progress reports first held a candidate within 1% of the best they end with (a depth-first
search inside a budget often has its best long before the budget is spent). The same
row with `deepen=False` shows what the depth-first search at those limits reaches on its own.

    python benchmarks/search_reach.py [--only lora,...] [--budget 60] [--no-compare]
        [--time SECONDS] [--json FILE]

--time also compiles the deepened search's first candidate and the paper's μGraph and times
them against each other and against the program run by XLA (alternating, inputs cold):
whether the first is the paper's μGraph "or a better one", and faster than XLA; the first
candidate as fused as the paper's, when another, is timed with them.

The rank says how far the cost model's order puts a fused form, not how fast it runs:
benchmarks/superoptimize.py times the best candidates against jax.jit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

import mirage_jax as mj
from mirage_jax.ir import model_graphs as mg
from mirage_jax.ir import paper_graphs as pg
from mirage_jax.runtime import profile

# A best so far within this fraction of the search's last one counts as found (the costs of
# the same form on other grids differ by less).
BEST_TOLERANCE = 0.01
# --time: the input sets cycled through exceed this many bytes (a few last-level caches).
COLD_BYTES = 200e6

# (row name, builder of (reference, the paper's μGraph))
CASES = [
    ("rmsnorm_linear_bs8", lambda: pg.rmsnorm_linear(batch=8)),
    ("rmsnorm_linear_bs1", lambda: pg.rmsnorm_linear(batch=1)),
    ("gated_mlp", pg.gated_mlp),
    ("ntrans", pg.ntrans),
    ("lora", pg.lora),
    ("gqa_prefill", pg.gqa_prefill),
    ("gqa_decode", pg.gqa_decode),
    ("qknorm_gqa", pg.qknorm_gqa),
    ("layernorm_linear", mg.layernorm_linear),
    ("swiglu_down", mg.swiglu_down),
    ("masked_attention", mg.masked_attention),
]


def form(graph: mj.KernelGraph) -> tuple:
    """A graph up to its grids, maps, loop ranges, tiles and the order of its ops: its
    kernel-level ops, each customized op by its block graph's ops."""
    kinds = []
    for op in graph.ops:
        if op.kind in ("input", "output"):
            continue
        inner = op.block_graph if op.kind == "customized" else None
        kinds.append((op.kind, tuple(sorted(o.kind for o in inner.ops)) if inner else ()))
    return tuple(sorted(kinds))


def kernels(graph: mj.KernelGraph) -> int:
    """Kernel-level ops: each customized op and each library op is one kernel launch."""
    return sum(op.kind not in ("input", "output") for op in graph.ops)


def best_found_at(reports: list[mj.SearchProgress]) -> float | None:
    """The search's seconds at its first report whose best so far (by the cost model) was
    already within BEST_TOLERANCE of the last report's: when it had what it ends with."""
    best = [p for p in reports if p.best_seconds is not None]
    if not best:
        return None
    final = best[-1].best_seconds
    return next(p.seconds for p in best if p.best_seconds <= final * (1 + BEST_TOLERANCE))


def time_against_paper(first, paper, budget_s: float, fused=None, reference=None) -> dict:
    """Medians (ms) of the search's first candidate and of the paper's μGraph, both compiled,
    alternating in rounds over input sets that together exceed the last-level cache: whether
    the first is the paper's μGraph "or a better one". `fused`, the first candidate as fused
    as the paper's when it is not the first, is timed with them ("fused_ms"), and so is
    `reference`, the program itself, which runs as XLA ops ("xla_ms")."""
    graphs = {"first": first, "paper": paper}
    if reference is not None:
        graphs["xla"] = reference
    if fused is not None and fused.hash() != first.hash():
        graphs["fused"] = fused
    functions = {name: jax.jit(mj.compile(g)) for name, g in graphs.items()}
    rng = np.random.default_rng(0)
    shapes = [(t.shape, t.dtype) for t in paper.inputs]
    size = sum(math.prod(s) * np.dtype(d).itemsize for s, d in shapes)
    sets = [
        [jax.device_put(jnp.asarray(rng.standard_normal(s), d)) for s, d in shapes]
        for _ in range(max(2, int(COLD_BYTES // max(size, 1)) + 1))
    ]
    times, _ = profile.median_times(functions, sets[0], budget_s=budget_s, arg_sets=sets)
    return {f"{name}_ms": seconds * 1e3 for name, seconds in times.items() if name in graphs}


def reach(reference, paper, config: mj.SearchConfig, first: list | None = None) -> dict:
    """The row's figures; `first`, when given, receives the search's first candidate and
    its first candidate as fused as the paper's (or None)."""
    start = time.perf_counter()
    reports: list[mj.SearchProgress] = []
    result = mj.search(reference, config, progress=reports.append)
    seconds = time.perf_counter() - start
    fused = [kernels(g) <= kernels(paper) for g in result]
    if first is not None and len(result):
        first.append(result.candidates[0])
        first.append(result.candidates[fused.index(True)] if True in fused else None)
    return dict(
        candidates=len(result),
        paper_rank=fused.index(True) + 1 if True in fused else None,
        paper_form=form(paper) in {form(g) for g in result},
        paper_exact=paper.hash() in {g.hash() for g in result},
        first_kernels=kernels(result.candidates[0]) if len(result) else None,
        seconds=seconds,
        best_at_s=best_found_at(reports),
        states=result.stats.states_explored,
        reason=result.reason,
    )


def cell(row: dict) -> str:
    rank = "not found" if row["paper_rank"] is None else f"rank {row['paper_rank']}"
    if row["paper_exact"]:
        rank += ", the paper's own"
    elif row["paper_form"]:
        rank += ", the paper's form found"
    stop = f", {row['reason']}" if row["reason"] else ""
    found = "" if row["best_at_s"] is None else f" (its best by {row['best_at_s']:.1f} s)"
    return (
        f"{rank} of {row['candidates']}, {row['seconds']:.1f} s{found}, "
        f"{row['states']:,} states{stop}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated row names")
    parser.add_argument("--budget", type=float, default=60.0, help="time_budget_s per search")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-compare", action="store_true", help="skip the deepen=False rows")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    parser.add_argument(
        "--time",
        type=float,
        default=0,
        metavar="SECONDS",
        help="also time the deepened search's first candidate against the paper's μGraph, "
        "for about this long each",
    )
    args = parser.parse_args()
    if args.time < 0:
        parser.error(f"--time must be 0 (off) or positive, got {args.time}")
    only = {s for s in args.only.split(",") if s}
    rows = []
    for name, build in CASES:
        if only and name not in only:
            continue
        reference, paper = build()
        config = mj.SearchConfig(time_budget_s=args.budget, threads=args.threads)
        preset = config.for_graph(reference).preset  # the "auto" preset's choice
        first: list = []
        row = dict(program=name, preset=preset, deepened=reach(reference, paper, config, first))
        row["paper_kernels"] = kernels(paper)
        if args.time and first:
            row["timed"] = time_against_paper(first[0], paper, args.time, first[1], reference)
            t = row["timed"]
            print(
                f"  {name}: first candidate {t['first_ms']:.3f} ms, the paper's μGraph "
                f"{t['paper_ms']:.3f} ms ({t['paper_ms'] / t['first_ms']:.2f}x), XLA "
                f"{t['xla_ms']:.3f} ms ({t['xla_ms'] / t['first_ms']:.2f}x)",
                flush=True,
            )
            if "fused_ms" in t:
                print(
                    f"  {name}: first as fused as the paper's {t['fused_ms']:.3f} ms "
                    f"({t['paper_ms'] / t['fused_ms']:.2f}x)",
                    flush=True,
                )
        if not args.no_compare:
            flat = dataclasses.replace(config, deepen=False)
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
        "| program | auto preset | paper's kernels | first as fused as the paper's, deepened "
        "| first candidate's kernels |" + (" depth first at the same limits |" if compare else "")
    )
    print("|---|---|---|---|---|" + ("---|" if compare else ""))
    for r in rows:
        line = (
            f"| {r['program']} | {r['preset']} | {r['paper_kernels']} | {cell(r['deepened'])} "
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

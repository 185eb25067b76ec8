"""Which of the candidates the cost model ties superoptimize should time: each tied candidate
of a memory-bound product compiled and timed, and where the fastest stands in the model's
order and in the tie order superoptimize uses (mirage_jax/superopt/contenders.py).

The model prices every way to stream a weight once alike, so a decode step's products have
dozens of candidates within 2% of each other, and superoptimize times the first one or two
(as many as build at once). For each program this searches, keeps the candidates tied with
the model's best (within contenders.COST_TIE, the original aside, --max at most), times them
alternating in rounds with their inputs evicted from the caches between calls (as the
decorator times a region of a function larger than the cache), and prints per candidate its
grid and loop, its model cost, contenders.cut_row_bytes and its median; then, for both
orders, the place of the fastest and the first candidate's time over the fastest's.

    python benchmarks/ties.py [--only gpt2_logits_b1,...] [--budget 5] [--max 10]
        [--quick] [--json FILE]

--quick runs small shapes (seconds; the suite runs it) whose times say nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys

import jax
import numpy as np

import mirage_jax as mj
from mirage_jax.runtime import cold_inputs, profile
from mirage_jax.runtime import compile as runtime_compile
from mirage_jax.superopt import contenders


@dataclasses.dataclass(frozen=True)
class Program:
    """A product `a @ b` of the zoo's decode steps: a[m, k] @ b[k, n]."""

    name: str
    a: tuple[int, int]
    b: tuple[int, int]
    note: str


PROGRAMS = [
    # the tied embedding as the frontend lays x @ wte.T out: wte[vocab, d] @ x^T[d, rows]
    Program("gpt2_logits_b1", (8192, 768), (768, 1), "GPT-2's tied logits, batch 1"),
    Program("gpt2_logits_b8", (8192, 768), (768, 8), "GPT-2's tied logits, batch 8"),
    Program("gpt2_fc_b1", (1, 768), (768, 3072), "GPT-2's MLP up projection, batch 1"),
    Program("llama_down_b8", (8, 2816), (2816, 1024), "Llama's down projection, batch 8"),
]
QUICK = [
    Program("gpt2_logits_b1", (512, 64), (64, 1), "tiny"),
    Program("gpt2_fc_b1", (1, 64), (64, 256), "tiny"),
]


def graph(program: Program) -> mj.KernelGraph:
    kg = mj.KernelGraph()
    a, b = kg.new_input(program.a), kg.new_input(program.b)
    kg.mark_output(kg.matmul(a, b))
    return kg


def structure(candidate: mj.KernelGraph) -> str:
    """Each kernel's grid, loop and tile of its largest input: what tells tied candidates
    apart."""
    kernels = []
    for op in candidate.ops:
        bg = op.block_graph
        if bg is None:
            continue
        inputs = [b for b in bg.ops if b.kind == "input"]
        largest = max(inputs, key=lambda b: math.prod(b.kernel_shape or ()))
        tile = "x".join(map(str, largest.outputs[0].shape))
        grid = ",".join(map(str, bg.grid))
        kernels.append(f"grid ({grid}) loop {bg.forloop_range} tile {tile}")
    return "; ".join(kernels) or "XLA"


def first_and_fastest(order: list[int], times: list[float]) -> tuple[int, float]:
    """(1-based place of the fastest in `order`, the first's time over the fastest's)."""
    fastest = min(range(len(times)), key=times.__getitem__)
    return order.index(fastest) + 1, times[order[0]] / times[fastest]


def measure(program: Program, budget_s: float, most: int) -> dict:
    kg = graph(program)
    result = mj.search(kg, mj.SearchConfig(time_budget_s=budget_s))
    ranked = [
        (c, cost) for c, cost in zip(result.candidates, result.costs) if c.hash() != kg.hash()
    ]
    tied = ranked[: min(most, contenders.tied_with_best(ranked))]
    rng = np.random.default_rng(0)
    inputs = [jax.device_put(rng.standard_normal(t.shape, dtype=np.float32)) for t in kg.inputs]
    sets = cold_inputs.rotation(inputs)
    runtime_compile.prebuild([c for c, _ in tied])
    fns = {str(i): jax.jit(runtime_compile.compile(c)) for i, (c, _) in enumerate(tied)}
    fns["xla"] = jax.jit(lambda a, b: a @ b)
    times, rounds = profile.median_times(fns, inputs, budget_s=2.0, arg_sets=sets)
    measured = [times[str(i)] for i in range(len(tied))]
    by_ties = [[c for c, _ in tied].index(c) for c, _ in contenders.tie_order(tied)]
    rows = [
        dict(
            structure=structure(c),
            cost_ms=cost * 1e3,
            cut_row_bytes=contenders.cut_row_bytes(c),
            measured_ms=measured[i] * 1e3,
        )
        for i, (c, cost) in enumerate(tied)
    ]
    out = dict(name=program.name, note=program.note, rounds=rounds, xla_ms=times["xla"] * 1e3)
    out["candidates"] = rows
    if tied:
        for label, order in (("model", list(range(len(tied)))), ("ties", by_ties)):
            place, regret = first_and_fastest(order, measured)
            out[f"{label}_order"] = order
            out[f"fastest_in_{label}_order"] = place
            out[f"{label}_first_over_fastest"] = regret
    return out


def report(row: dict) -> str:
    lines = [f"{row['name']} ({row['note']}): XLA {row['xla_ms']:.3f} ms, {row['rounds']} rounds"]
    for i, c in enumerate(row["candidates"]):
        lines.append(
            f"  [{i}] {c['measured_ms']:.3f} ms  model {c['cost_ms']:.3f} ms  "
            f"cut rows {c['cut_row_bytes'] / 1e6:.1f} MB  {c['structure']}"
        )
    if row["candidates"]:
        for label in ("model", "ties"):
            lines.append(
                f"  {label} order {row[f'{label}_order']}: fastest at place "
                f"{row[f'fastest_in_{label}_order']}, first at "
                f"{row[f'{label}_first_over_fastest']:.2f}x the fastest's time"
            )
    else:
        lines.append("  no candidate besides the original")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated program names")
    parser.add_argument("--budget", type=float, default=5.0, help="search seconds per program")
    parser.add_argument("--max", type=int, default=10, help="tied candidates timed at most")
    parser.add_argument("--quick", action="store_true", help="tiny shapes, for the tests")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    if args.max < 1:
        parser.error(f"--max must be at least 1, got {args.max}")
    if not args.budget > 0:
        parser.error(f"--budget must be positive seconds, got {args.budget}")
    programs = QUICK if args.quick else PROGRAMS
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - {p.name for p in programs})
        if unknown:
            parser.error(f"unknown programs {unknown}; known: {[p.name for p in programs]}")
        programs = [p for p in programs if p.name in wanted]
    rows = []
    for program in programs:
        rows.append(measure(program, args.budget, args.max))
        print(report(rows[-1]), flush=True)
    for label in ("model", "ties"):
        regrets = [r[f"{label}_first_over_fastest"] for r in rows if r["candidates"]]
        if regrets:
            mean = math.exp(sum(map(math.log, regrets)) / len(regrets))
            print(f"{label} order: first at {mean:.2f}x the fastest's time (geometric mean)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

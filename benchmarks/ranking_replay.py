"""Cost-model ranking work that can be repeated: store candidates with their measured times,
then re-rank them under a new cost model, or re-time them under new code generation.

A ranking figure (benchmarks/ranking.py) from one superoptimize run mixes three things that
change between runs: the search's candidates, the code generated for them, and the machine's
calibration (taken again after every change under cc/, and skewed when the machine is busy).
This tool holds two of them still:

    python benchmarks/ranking_replay.py collect OUT.json [--budget 30] [--top 10]
        [--time-budget 4] [--only lora,...] [--cases paper|bf16-prefill]
    python benchmarks/ranking_replay.py rank IN.json [--only ...] [--machine] [--flat-bf16]
        [--split-ratio R]
    python benchmarks/ranking_replay.py retime IN.json OUT.json [--time-budget 4] [--only ...]
    python benchmarks/ranking_replay.py repeat FIRST.json SECOND.json [--only ...]

`collect` searches each program of benchmarks/search_reach.py (`--cases bf16-prefill`:
three of them at a bfloat16 prefill's shapes, BF16_PREFILL_CASES) with default limits, keeps its
first `--top` candidates of distinct code and the paper's μGraph, times them as superoptimize does
(rounds for about `--time-budget` seconds, inputs rotated past the last-level cache) and
stores each one's graph (KernelGraph.to_json), median and estimate with the calibration it
was costed under, and each program's reference graph (what XLA runs). `rank`
costs the stored graphs with the current build under that stored calibration (`--machine`:
this machine's calibration instead; `--flat-bf16`: without the rates of products with a
bfloat16 weight, every generated flop at the float32 rate, as the model priced them before it
had them; `--split-ratio R`: kernels of more blocks than cores streaming at R times
dram_bandwidth, for a calibration stored before split_stream_bandwidth was measured) and
prints per program the Spearman correlation, the
place of the fastest measured candidate in the model's order and the regret, as
superoptimize reports them. `retime` measures the stored graphs again with the current build
(for a code-generation change), keeping their stored calibration. `repeat` ranks a second
timing of the same candidates by the first one's: the figures a model could reach against
a machine that repeats itself only that well.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kernels import standard_normal_inputs
from ranking import Ranking, ranking, summarize
from search_reach import CASES

import mirage_jax as mj
from mirage_jax import _core
from mirage_jax.ir import model_graphs as mg
from mirage_jax.ir import paper_graphs as pg
from mirage_jax.runtime import cold_inputs, profile
from mirage_jax.superopt import calibration_cache
from mirage_jax.superopt.calibration import Calibration

# A prefill's projections in bfloat16 (256 rows, hidden 1024), whose candidates run on the
# generated code's bfloat16-weight path (the AMX tiles where the CPU has them).
BF16_PREFILL_CASES = [
    (
        "rmsnorm_linear_bf16",
        lambda: pg.rmsnorm_linear(batch=256, hidden=1024, out_features=1024, dtype="bfloat16"),
    ),
    (
        "gated_mlp_bf16",
        lambda: pg.gated_mlp(batch=256, hidden=1024, intermediate=2816, dtype="bfloat16"),
    ),
    (
        "layernorm_linear_bf16",
        lambda: mg.layernorm_linear(batch=256, hidden=1024, out_features=1024, dtype="bfloat16"),
    ),
]
CASE_SETS = {"paper": CASES, "bf16-prefill": BF16_PREFILL_CASES}

_BF16_RATES = ("generated_bf16_flops", "generated_f32_bf16_flops")


def stored_target(
    calibration: dict, flat_bf16: bool = False, split_ratio: float | None = None
) -> _core.Target:
    """The target of a stored calibration. One stored before the bfloat16-weight rates were
    measured, or flat_bf16: those products priced at generated_flops (the rates zeroed). One
    stored before split_stream_bandwidth was measured streams split kernels at
    dram_bandwidth, as the model did then; split_ratio sets it to that share of
    dram_bandwidth instead (the ratio a calibration measures on the machine)."""
    fields = dict(calibration)
    flat = flat_bf16 or any(name not in fields for name in _BF16_RATES)
    for name in _BF16_RATES:
        fields.setdefault(name, fields["generated_flops"])
    fields.setdefault("split_stream_bandwidth", fields["dram_bandwidth"])
    if split_ratio is not None:
        fields["split_stream_bandwidth"] = split_ratio * fields["dram_bandwidth"]
    target = Calibration.from_json(fields).target()
    if flat:
        target.generated_bf16_flops = target.generated_f32_bf16_flops = 0.0
    return target


def _share(text: str) -> float:
    """A ratio in (0, 1]: a split stream no faster than one strip a core."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"takes a number in (0, 1], got {text!r}")
    return value


def _say(line: str) -> None:
    print(line, flush=True)


def median_times(graphs: list[mj.KernelGraph], budget_s: float) -> list[float]:
    """Median seconds of each graph's compiled callable, timed as superoptimize times its
    candidates (mirage_jax/runtime/profile.py: rounds in a random order, inputs rotated past
    the last-level cache), so that a change in the machine's load moves all of them alike."""
    args = standard_normal_inputs(graphs[0])
    fns = {str(i): jax.jit(mj.compile(g)) for i, g in enumerate(graphs)}
    times, _ = profile.median_times(fns, args, budget_s, cold_inputs.rotation(args))
    return [times[str(i)] for i in range(len(graphs))]


def _figures(program: str, figures: Ranking) -> str:
    return (
        f"{program:20s} spearman {figures.spearman:5.2f}  fastest at {figures.fastest_rank}"
        f"  regret {figures.regret:.2f}"
    )


def collect(cases, search_s: float, top: int, budget_s: float, log=_say) -> dict:
    """cases: (name, builder of (reference, paper μGraph or None))."""
    calibration = calibration_cache.load_or_measure()
    target = calibration.target()
    rows, references = [], {}
    for name, build in cases:
        reference, paper = build()
        references[name] = reference.to_json()
        found = mj.search(reference, config=mj.SearchConfig(time_budget_s=search_s, threads=2))
        # Candidates the generator makes the same kernels of (a loop cut into 4-row steps
        # runs as the 8-row cut, cc/codegen/cpu/loop_steps.h) are one candidate, as
        # superoptimize times them; the paper's μGraph is kept unless it is one of them.
        labelled, seen = [], set()
        for label, g in [(f"c{i}", g) for i, g in enumerate(found.candidates)] + [("paper", paper)]:
            if g is None or (label != "paper" and len(labelled) >= top):
                continue
            code = _core.cpu_code_hash(g._core)
            if code in seen:
                continue
            seen.add(code)
            labelled.append((label, g))
        if not labelled:
            log(f"{name}: no candidate to time")
            continue
        log(f"{name}: timing {len(labelled)} candidates")
        medians = median_times([g for _, g in labelled], budget_s)
        for (label, g), median in zip(labelled, medians):
            estimate = _core.estimate_cost(g._core, target)[0]
            rows.append(
                dict(
                    program=name,
                    label=label,
                    graph=g.to_json(),
                    median_s=median,
                    estimate_s=estimate,
                )
            )
            log(f"  {label:6s} model {estimate * 1e3:8.3f} ms  measured {median * 1e3:8.3f} ms")
    return dict(calibration=calibration.to_json(), candidates=rows, references=references)


def rank(doc: dict, target: _core.Target, log=_say) -> dict:
    """Per program, the ranking figures of the stored candidates under `target` and their
    estimates by label."""
    by_program: dict[str, list[dict]] = {}
    for row in doc["candidates"]:
        by_program.setdefault(row["program"], []).append(row)
    results = {}
    for program, rows in by_program.items():
        costs = {
            r["label"]: _core.estimate_cost(mj.KernelGraph.from_json(r["graph"])._core, target)[0]
            for r in rows
        }
        timings = {r["label"]: r["median_s"] for r in rows}
        figures = ranking(costs, timings)
        results[program] = (figures, costs)
        order = " ".join(
            f"{n}:{costs[n] * 1e3:.2f}/{timings[n] * 1e3:.2f}" for n in sorted(costs, key=costs.get)
        )
        log(f"{_figures(program, figures)}  | model/measured ms: {order}")
    log(summarize([figures for figures, _ in results.values()]).line())
    return results


def retime(doc: dict, budget_s: float, log=_say) -> dict:
    rows = [dict(r) for r in doc["candidates"]]
    for program in dict.fromkeys(r["program"] for r in rows):
        mine = [r for r in rows if r["program"] == program]
        log(f"{program}: timing {len(mine)} candidates")
        medians = median_times([mj.KernelGraph.from_json(r["graph"]) for r in mine], budget_s)
        for r, median in zip(mine, medians):
            log(f"  {r['label']:6s} {r['median_s'] * 1e3:8.3f} -> {median * 1e3:8.3f} ms")
            r["median_s"] = median
    return dict(doc, candidates=rows)


def repeatability(first: dict, second: dict, log=_say) -> dict:
    """Per program, the ranking figures of `second`'s times against `first`'s, as if the first
    timing were the cost model: what any model can reach against timings that repeat only
    this well. Candidates are matched by graph."""
    before = {(r["program"], r["graph"]): r["median_s"] for r in first["candidates"]}
    results = {}
    for program in dict.fromkeys(r["program"] for r in second["candidates"]):
        rows = [
            r
            for r in second["candidates"]
            if r["program"] == program and (program, r["graph"]) in before
        ]
        results[program] = figures = ranking(
            {r["label"]: before[(program, r["graph"])] for r in rows},
            {r["label"]: r["median_s"] for r in rows},
        )
        log(f"{_figures(program, figures)}  ({figures.candidates} candidates in both)")
    total = summarize(list(results.values()))
    log(
        f"the second timing ranked by the first: mean Spearman {total.mean_spearman:.2f} over "
        f"{total.with_spearman} programs; the second's fastest in the first's top 4 in "
        f"{total.fastest_in_top4} of {total.ranked}; the first's fastest ran "
        f"{total.regret_geomean:.2f}x the second's fastest (geometric mean)"
    )
    return results


def _only(doc: dict, only: str | None) -> dict:
    if not only:
        return doc
    names = set(only.split(","))
    return dict(doc, candidates=[r for r in doc["candidates"] if r["program"] in names])


def load(path: str, only: str | None) -> dict:
    """A file `collect` or `retime` wrote; SystemExit naming the problem otherwise."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"ranking_replay: cannot read {path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("candidates"), list):
        sys.exit(f"ranking_replay: {path} holds no stored candidates (write it with collect)")
    return _only(doc, only)


def _write(path: str, doc: dict) -> None:
    with open(path, "w") as f:
        json.dump(doc, f)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("out")
    c.add_argument("--budget", type=float, default=30.0)
    c.add_argument("--top", type=int, default=10)
    c.add_argument("--cases", choices=sorted(CASE_SETS), default="paper")
    r = sub.add_parser("rank")
    r.add_argument("input")
    r.add_argument("--machine", action="store_true")
    r.add_argument("--flat-bf16", action="store_true")
    r.add_argument("--split-ratio", type=_share, help="split_stream_bandwidth / dram_bandwidth")
    t = sub.add_parser("retime")
    t.add_argument("input")
    t.add_argument("out")
    a = sub.add_parser("repeat")
    a.add_argument("first")
    a.add_argument("second")
    for p in (c, t):
        p.add_argument("--time-budget", type=float, default=4.0)
    for p in (c, r, t, a):
        p.add_argument("--only")
    args = parser.parse_args(argv)
    if args.command == "repeat":
        repeatability(load(args.first, args.only), load(args.second, args.only))
        return
    if args.command == "collect":
        wanted = set(args.only.split(",")) if args.only else None
        cases = [(n, b) for n, b in CASE_SETS[args.cases] if wanted is None or n in wanted]
        if wanted and len(cases) != len(wanted):
            sys.exit(f"ranking_replay: unknown programs: {sorted(wanted - {n for n, _ in cases})}")
        doc = collect(cases, args.budget, args.top, args.time_budget)
        _write(args.out, doc)
        return
    doc = load(args.input, args.only)
    if args.command == "rank":
        cal = calibration_cache.load_or_measure().to_json() if args.machine else None
        rank(doc, stored_target(cal or doc["calibration"], args.flat_bf16, args.split_ratio))
    else:
        _write(args.out, retime(doc, args.time_budget))


if __name__ == "__main__":
    main()

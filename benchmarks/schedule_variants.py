"""One stored candidate's kernel under other grids and for-loop lengths, timed side by side.

The cost model ties many of a program's candidates that the machine runs a few to twenty
percent apart, and most of those differ only in how one generated kernel is cut: its grid
and the number of steps its for-loop takes. This tool takes a candidate that
`benchmarks/ranking_replay.py collect` stored, recuts one of its kernels every way asked for,
and times all of them in one process (as superoptimize times its candidates: rounds in a
random order, inputs rotated past the last-level cache), beside the model's estimate of each
under the stored calibration:

    python benchmarks/schedule_variants.py IN.json PROGRAM LABEL --grids 8x1,8x8
        [--forloops 32,128] [--kernel 0] [--time-budget 12] [--repeat 2]

XLA's run of the program (its reference graph, as collect stores it, or as
benchmarks/search_reach.py builds it for files stored before) is timed in the same rounds,
and every time is printed beside it.

A grid keeps the stored kernel's maps on the axes it splits (an axis of size 1 maps nothing),
so a variant can split only along the axes the stored candidate splits: start from its most
split form (decode attention's grid (8, 8) gives (8, 1), (8, 2) and (8, 4)). The IR checks
each variant (a grid or for-loop that does not divide its tensors is refused by name).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ranking_replay import load, median_times, stored_target
from search_reach import CASES

import mirage_jax as mj
from mirage_jax import _core


def _customized(doc: dict, kernel: int) -> dict:
    ops = [op for op in doc["ops"] if op["kind"] == "customized"]
    if not 0 <= kernel < len(ops):
        raise ValueError(f"the graph has {len(ops)} generated kernels; no kernel {kernel}")
    return ops[kernel]["block_graph"]


def schedule_variant(
    graph_json: str, grid: Sequence[int], forloop: int | None = None, kernel: int = 0
) -> mj.KernelGraph:
    """The graph `graph_json` with its `kernel`-th generated kernel over `grid` (padded with
    1s to 3 axes) and, when given, `forloop` steps. ValueError when the stored kernel maps
    nothing on an axis `grid` splits, or when the IR refuses the result."""
    doc = json.loads(graph_json)
    block_graph = _customized(doc, kernel)
    new_grid = list(grid) + [1] * (3 - len(grid))
    if len(new_grid) != 3 or any(size < 1 for size in new_grid):
        raise ValueError(f"a grid is 1 to 3 positive sizes, got {list(grid)}")
    maps = [op.get("imap", op.get("omap")) for op in block_graph["ops"]]
    maps = [m for m in maps if m is not None]
    for axis, size in enumerate(new_grid):
        if size > 1 and all(m[axis] < 0 for m in maps):
            raise ValueError(
                f"grid axis {axis} of size {size}: the stored kernel splits nothing along it "
                f"(its grid is {block_graph['grid']}); start from a candidate that does"
            )
    block_graph["grid"] = new_grid
    if forloop is not None:
        block_graph["forloop_range"] = forloop
    for op in block_graph["ops"]:
        for key in ("imap", "omap"):
            if key in op:
                op[key] = [d if size > 1 else -1 for d, size in zip(op[key], new_grid)]
    try:
        return mj.KernelGraph.from_json(json.dumps(doc))
    except Exception as e:  # the IR's own message names the tensor and the dim
        raise ValueError(f"grid {new_grid}, forloop {forloop}: {e}") from e


def _grid(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(size) for size in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a grid is like 8x2, got {text!r}") from None


def variants(
    row: dict, grids: Sequence[tuple[int, ...]], forloops: Sequence[int | None], kernel: int
) -> dict[str, mj.KernelGraph]:
    """The stored candidate `row` and its variants, by name ("stored", "grid 8x2, forloop
    32", ...), each distinct graph once."""
    out = {"stored": mj.KernelGraph.from_json(row["graph"])}
    seen = {out["stored"].to_json()}
    for grid in grids:
        for forloop in forloops:
            graph = schedule_variant(row["graph"], grid, forloop, kernel)
            if graph.to_json() in seen:
                continue
            seen.add(graph.to_json())
            steps = "" if forloop is None else f", forloop {forloop}"
            out[f"grid {'x'.join(map(str, grid))}{steps}"] = graph
    return out


def reference(doc: dict, program: str) -> mj.KernelGraph | None:
    """The program's reference graph (what XLA runs): stored by collect, else built by
    search_reach's case of that name; None for neither."""
    stored = doc.get("references", {}).get(program)
    if stored is not None:
        return mj.KernelGraph.from_json(stored)
    build = dict(CASES).get(program)
    return None if build is None else build()[0]


def _positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0:
            raise argparse.ArgumentTypeError(f"takes a positive number, got {text!r}")
        return value

    return parse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input", help="a file ranking_replay.py collect wrote")
    parser.add_argument("program")
    parser.add_argument("label", help="c0, c1, ... or paper")
    parser.add_argument("--grids", type=lambda s: [_grid(g) for g in s.split(",")], required=True)
    parser.add_argument("--forloops", type=lambda s: [int(f) for f in s.split(",")])
    parser.add_argument("--kernel", type=int, default=0, help="which generated kernel, from 0")
    parser.add_argument(
        "--time-budget", type=_positive(float), default=12.0, help="seconds per timing"
    )
    parser.add_argument("--repeat", type=_positive(int), default=2, help="timings of all")
    args = parser.parse_args(argv)
    doc = load(args.input, args.program)
    rows = [r for r in doc["candidates"] if r["label"] == args.label]
    if not rows:
        sys.exit(f"schedule_variants: no candidate {args.label} of {args.program} in {args.input}")
    try:
        graphs = variants(rows[0], args.grids, args.forloops or [None], args.kernel)
    except ValueError as e:
        sys.exit(f"schedule_variants: {e}")
    target = stored_target(doc["calibration"])
    estimates = {name: _core.estimate_cost(g._core, target)[0] for name, g in graphs.items()}
    xla = reference(doc, args.program)
    if xla is not None:
        graphs["xla"] = xla
    timings = [median_times(list(graphs.values()), args.time_budget) for _ in range(args.repeat)]
    fastest = min(min(t) for t in timings)
    xla_s = min(t[-1] for t in timings) if xla is not None else None
    for i, name in enumerate(graphs):
        model = f"model {estimates[name] * 1e3:8.3f} ms" if name in estimates else " " * 17
        measured = "  ".join(f"{t[i] * 1e3:8.3f}" for t in timings)
        best = min(t[i] for t in timings)
        over_xla = f"  {xla_s / best:.2f}x XLA" if xla_s is not None else ""
        print(f"{name:28s} {model}  measured {measured} ms  {best / fastest:.2f}x{over_xla}")


if __name__ == "__main__":
    main()

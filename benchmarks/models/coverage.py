"""Matmul coverage of the zoo: which matmuls of each model land in a region that converts to
a μGraph, and why the others do not.

For each case the function is traced (`jax.make_jaxpr`) and partitioned by mirage_jax's
frontend, exactly as `mirage_jax.optimize` does before any search. Every `dot_general` (and
`conv_general_dilated`: a strided patch embedding is a matmul too) is then either

  - in a region that converts (`region_to_graph` succeeds and nothing blocks the region),
  - in a region that does not (the RegionNotSupported reason, or why it is blocked), or
  - outside every region (the reason the partitioner gave for that node).

The bodies of loops (`scan`, `while`: layers under `nn.scan`, a sampling loop) and the
branches of conds are probed as programs of their own, as mirage_jax.optimize rewrites
them. Nothing is searched or compiled, so the probe takes seconds per model.

    python benchmarks/models/coverage.py [--size tiny|small] [--dtype f32|bf16]
        [--only llama_prefill,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field

import jax

# The one place the zoo reaches into mirage_jax's frontend: if the frontend moves, change
# this line.
from mirage_jax.frontend import (
    CONTROL_FLOW,
    RegionNotSupported,
    partition,
    region_to_graph,
    sub_programs,
)

if __package__ in (None, ""):  # run as a script: import the zoo as a package
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from models import case as make_case
    from models import case_names
else:
    from . import case as make_case
    from . import case_names

MATMULS = ("dot_general", "conv_general_dilated")
_VAR_ID = re.compile(r"\bv\d+:")


@dataclass
class Matmul:
    """One matmul of the traced function and what became of it."""

    primitive: str
    lhs: str  # "float32[2,16,64]"
    rhs: str
    out: str
    params: str  # dimension_numbers (and for a conv, its strides)
    source: str  # "file:line (function)"
    region: int | None  # the region it is in, None when outside every region
    converts: bool
    reason: str  # "" when it converts


@dataclass
class Coverage:
    """The probe's findings for one case."""

    name: str
    matmuls: list = field(default_factory=list)
    regions: int = 0
    converting_regions: int = 0
    # (region index, its primitives, why it does not convert) of every failing region
    region_failures: list = field(default_factory=list)
    # reason -> count, over every node the partitioner left out of regions
    unsupported: dict = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        """The fraction of matmuls in converting regions (1.0 for a model without any)."""
        if not self.matmuls:
            return 1.0
        return sum(m.converts for m in self.matmuls) / len(self.matmuls)

    def reasons(self) -> Counter:
        """De-duplicated reasons the matmuls that do not convert give, with counts."""
        return Counter(normalize(m.reason) for m in self.matmuls if not m.converts)

    def to_json(self) -> dict:
        out = asdict(self)
        out["fraction"] = self.fraction
        out["reasons"] = dict(self.reasons())
        return out


def normalize(reason: str) -> str:
    """The reason with value ids dropped, so that the same cause counts once."""
    return _VAR_ID.sub("", reason)


def _aval(v) -> str:
    return f"{v.dtype.name}[{','.join(map(str, v.shape))}]"


def _params(node) -> str:
    p = node.params
    if node.name == "dot_general":
        return f"dimension_numbers={p['dimension_numbers']}"
    return (
        f"window_strides={p.get('window_strides')} dimension_numbers={p.get('dimension_numbers')}"
    )


def probe_function(name: str, fn, args) -> Coverage:
    """The coverage of `fn(*args)`, the bodies of its loops included (mirage_jax.optimize
    partitions each body as a program of its own)."""
    cov = Coverage(name)
    unsupported: Counter = Counter()
    _probe(cov, jax.make_jaxpr(fn)(*args), unsupported)
    cov.unsupported = dict(unsupported.most_common())
    return cov


def _probe(cov: Coverage, closed, unsupported: Counter) -> None:
    """Adds the matmuls and regions of `closed` (and of its loops' bodies) to `cov`; regions
    are numbered on from those already there."""
    part = partition(closed)
    first = cov.regions
    cov.regions += len(part.regions)
    region_of, region_ok = {}, {}
    for region in part.regions:
        for node in region.nodes:
            region_of[node.index] = first + region.index
        reason = f"in a blocked region: {region.blocked}" if region.blocked else ""
        if not reason:
            try:
                region_to_graph(region)
            except RegionNotSupported as e:
                reason = f"in a region that does not convert: {e.reason}"
            except Exception as e:
                reason = (
                    f"in a region whose conversion crashed: region_to_graph raised "
                    f"{type(e).__name__}: {e}"
                )
        region_ok[first + region.index] = reason
        if reason:
            cov.region_failures.append((first + region.index, " ".join(region.primitives), reason))
    cov.converting_regions += sum(not r for r in region_ok.values())
    unsupported.update(normalize(r) for r in part.unsupported.values())
    for node in part.program.nodes:
        if node.name in CONTROL_FLOW:
            for body in sub_programs(node):
                _probe(cov, body, unsupported)
        if node.name not in MATMULS:
            continue
        lhs, rhs = node.invars[:2]
        where = region_of.get(node.index)
        if where is None:
            reason = "outside every region: " + part.unsupported.get(
                node.index, "(supported, but in no region the partitioner kept)"
            )
        else:
            reason = region_ok[where]
        cov.matmuls.append(
            Matmul(
                node.name,
                _aval(lhs),
                _aval(rhs),
                _aval(node.outvars[0]),
                _params(node),
                node.source,
                where,
                not reason,
                reason,
            )
        )


def probe(case) -> Coverage:
    """The coverage of a zoo Case."""
    return probe_function(case.name, case.fn, case.args())


def _abridged(primitives: str, limit: int = 160) -> str:
    return primitives if len(primitives) <= limit else primitives[:limit] + " ..."


def report(coverages) -> str:
    """The fraction per case, then every distinct reason with its count and an example."""
    lines = [
        "| case | matmuls | in converting regions | fraction | regions (converting) |",
        "|---|---|---|---|---|",
    ]
    for c in coverages:
        ok = sum(m.converts for m in c.matmuls)
        lines.append(
            f"| {c.name} | {len(c.matmuls)} | {ok} | {c.fraction:.0%} "
            f"| {c.regions} ({c.converting_regions}) |"
        )
    total = Counter()
    examples = {}
    for c in coverages:
        for m in c.matmuls:
            if m.converts:
                continue
            key = normalize(m.reason)
            total[key] += 1
            examples.setdefault(
                key,
                f"{c.name}: {m.primitive} {m.lhs} x {m.rhs} -> {m.out}, "
                f"{m.params}, at {m.source or '(no source)'}",
            )
    if total:
        lines += [
            "",
            "Why matmuls are not in a converting region (count over all cases; an example):",
            "",
        ]
        for reason, n in total.most_common():
            lines.append(f"- {n}× {reason}\n    e.g. {examples[reason]}")
    failures, shown = Counter(), {}
    for c in coverages:
        for index, primitives, reason in c.region_failures:
            key = normalize(reason)
            failures[key] += 1
            shown.setdefault(key, f"{c.name} region {index}: {_abridged(primitives)}")
    if failures:
        lines += [
            "",
            "Regions that do not convert, with or without a matmul (count over all "
            "cases; an example and its primitives):",
            "",
        ]
        lines += [f"- {n}× {r}\n    e.g. {shown[r]}" for r, n in failures.most_common()]
    left_out = Counter()
    for c in coverages:
        left_out.update(c.unsupported)
    if left_out:
        lines += [
            "",
            "Every node the partitioner leaves out of regions, by reason (count over "
            "all cases; what splits regions apart):",
            "",
        ]
        lines += [f"- {n}× {r}" for r, n in left_out.most_common()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python benchmarks/models/coverage.py", description=__doc__.strip().splitlines()[0]
    )
    parser.add_argument("--size", choices=("tiny", "small"), default="small")
    parser.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--json", default="", help="also write the findings to this file")
    args = parser.parse_args(argv)
    known = case_names(args.size)
    only = [s for s in args.only.split(",") if s]
    unknown = [s for s in only if s not in known]
    if unknown:
        parser.error(f"--only: unknown case(s) {', '.join(unknown)}; known: {', '.join(known)}")
    coverages = [probe(make_case(name, args.size, args.dtype)) for name in only or known]
    print(report(coverages))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([c.to_json() for c in coverages], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What became of an optimized function: one RegionReport per region (the kernel chosen or
why it runs as plain JAX, its source lines, superoptimize's report) and the text
Optimized.explain() prints.
"""

from __future__ import annotations

import linecache
import re
from dataclasses import dataclass, field


@dataclass
class RegionReport:
    """What happened to one region: `chosen` is "kernel" or "xla"; `reason` says why."""

    sources: list
    primitives: list
    chosen: str
    reason: str
    report: str  # superoptimize's report, "" when it did not run
    flops: int = 0
    # Later specializations of this region: (what, a RegionReport or an Optimized).
    variants: list = field(default_factory=list)
    # By candidate hash, when superoptimize searched and timed this region: the cost model's
    # estimate and the measured median seconds ("xla": the original), to judge its ranking.
    costs: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    def headline(self) -> str:
        return f"region at {describe_sources(self.sources)}: {self.chosen} ({self.reason})"

    def __str__(self):
        text = (
            f"{self.headline()}\n  primitives: {' '.join(self.primitives)}\n  flops: {self.flops}"
        )
        lines = source_lines(self.sources)
        if lines:
            text += "\n  source:\n" + "\n".join("    " + line for line in lines)
        if self.report:
            text += "\n" + "\n".join("  " + line for line in self.report.splitlines())
        for what, variant in self.variants:
            body = variant.explain_all() if hasattr(variant, "explain_all") else str(variant)
            text += f"\n  {what}:\n" + "\n".join("    " + line for line in body.splitlines())
        return text


_SOURCE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?::\d+)?(?: \((?P<fn>.*)\))?$")


def _parsed(sources) -> list[tuple[str, int, str]]:
    """Distinct (file, line, function) of "file:line[:column] (function)" sources."""
    out = []
    for s in sources:
        m = _SOURCE.match(s or "")
        if m and (m["file"], int(m["line"]), m["fn"] or "") not in out:
            out.append((m["file"], int(m["line"]), m["fn"] or ""))
    return out


def describe_sources(sources) -> str:
    """ "file.py:9-10 (fn)": the region's lines, per file and function."""
    groups: dict = {}
    for file, line, fn in _parsed(sources):
        groups.setdefault((file, fn), []).append(line)
    parts = []
    for (file, fn), lines in groups.items():
        lo, hi = min(lines), max(lines)
        span = f"{lo}" if lo == hi else f"{lo}-{hi}"
        parts.append(f"{file.rsplit('/', 1)[-1]}:{span}" + (f" ({fn})" if fn else ""))
    return ", ".join(parts) or "(no source info)"


def source_lines(sources) -> list[str]:
    """The text of each source line, as "file:line  <code>"."""
    out = []
    for file, line, _ in _parsed(sources):
        code = linecache.getline(file, line).strip()
        if code:
            out.append(f"{file.rsplit('/', 1)[-1]}:{line}  {code}")
    return out


# At most this many nodes left out next to the regions are listed.
MAX_LEFT_OUT = 12


def left_out(part) -> list[str]:
    """The nodes left to plain JAX that touch a region (read one of its values or make one of
    its inputs), with why each was left out: what cut the regions apart. A model's other
    plain-JAX nodes (its embeddings, its masks' comparisons) are not listed."""
    in_region = {n.index for r in part.regions for n in r.nodes}
    made_by = {v: n.index for n in part.program.nodes for v in n.outvars}
    read_by: dict = {}
    for n in part.program.nodes:
        for v in n.invars:
            read_by.setdefault(v, set()).add(n.index)
    out: list[str] = []
    for n in part.program.nodes:
        reason = part.unsupported.get(n.index)
        if reason is None or n.index in in_region:
            continue
        reads = any(made_by.get(v) in in_region for v in n.invars if v in made_by)
        feeds = any(read_by.get(v, set()) & in_region for v in n.outvars)
        if reads or feeds:
            line = f"{describe_sources([n.source])}: {reason}"
            if line not in out:
                out.append(line)
    return out


def explain(spec) -> str:
    """The explanation of one specialization (an optimize.decorator._Specialization)."""
    if spec.backend == "xla":
        return "backend 'xla': the function runs as plain JAX (no rewriting)"
    if not spec.reports:
        return "no region with a matmul or a reduction: the function runs as plain JAX"
    kernels = sum(r.chosen == "kernel" for r in spec.reports)
    if spec.whole_program_kept:
        head = (
            f"{len(spec.reports)} region(s), {kernels} run as generated kernels "
            f"(backend {spec.backend}), {len(spec.reports) - kernels} as plain JAX"
        )
    else:
        head = (
            f"{len(spec.reports)} region(s), {kernels} with a kernel that beat XLA on "
            f"the region alone (backend {spec.backend}); the function runs as jax.jit"
        )
    if spec.note:
        head += "\n" + spec.note
    if spec.left_out:
        shown = spec.left_out[:MAX_LEFT_OUT]
        more = len(spec.left_out) - len(shown)
        head += "\nleft to plain JAX next to the regions:\n" + "\n".join(
            "  " + line for line in shown
        )
        if more:
            head += f"\n  ... and {more} more"
    return "\n\n".join([head] + [str(r) for r in spec.reports])

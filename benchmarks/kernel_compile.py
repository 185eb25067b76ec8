"""How long g++ takes a generated CPU kernel, with the precompiled header the runtime builds
(mirage_jax/runtime/precompiled_header.py) and without it, in turns in one process.

The kernels are the paper μGraphs' (mirage_jax/ir/paper_graphs.py) at their paper shapes.
Each round compiles every kernel once each way, the order of the two alternating, into a
scratch directory (the kernel cache is not used), and the medians over the rounds are
printed with their ratio. The header's own build is timed once, first.

    PYTHONPATH=. python -P benchmarks/kernel_compile.py [--rounds 3] [--only lora,...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import mirage_jax  # noqa: F401 (loads the extension before the runtime modules)
from mirage_jax.ir.paper_graphs import PROGRAMS
from mirage_jax.runtime import backends, precompiled_header, toolchain


def kernel_sources(names: list[str]) -> dict[str, str]:
    """{program[/i]: CPU source} of every customized op of each program's paper μGraph."""
    sources = {}
    for name in names:
        _, fused = PROGRAMS[name].build()
        kernels = [op.block_graph for op in fused.ops if op.block_graph is not None]
        for i, bg in enumerate(kernels):
            label = name if len(kernels) == 1 else f"{name}/{i}"
            sources[label] = backends.CPU.generate(bg._core, {})[1]
    return sources


def seconds(source: Path, library: Path, include: Path | None) -> float:
    start = time.perf_counter()
    toolchain.compile_cpu_library(source, library, include)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated programs (default: all)")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(PROGRAMS)
    unknown = sorted(set(names) - set(PROGRAMS))
    if unknown:
        raise SystemExit(f"kernel_compile: no program {unknown}; the programs: {sorted(PROGRAMS)}")
    if args.rounds < 1:
        raise SystemExit(f"kernel_compile: --rounds must be at least 1, got {args.rounds}")
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        # A header of its own, so that its build is timed here, not found from earlier.
        start = time.perf_counter()
        header = precompiled_header.build_in(directory / "machine")
        print(f"precompiling the headers: {time.perf_counter() - start:.2f} s (once a machine)")
        sources = kernel_sources(names)
        times: dict[str, dict[str, list[float]]] = {k: {"with": [], "without": []} for k in sources}
        for r in range(args.rounds):
            for i, (label, text) in enumerate(sources.items()):
                unit = directory / f"k{i}.cc"
                unit.write_text(text)
                ways = [("with", header), ("without", None)]
                for way, include in ways if (r + i) % 2 == 0 else ways[::-1]:
                    times[label][way].append(seconds(unit, directory / f"k{i}.so", include))
    print(f"{'kernel':24s} {'lines':>6s} {'with (s)':>9s} {'without (s)':>12s} {'ratio':>6s}")
    ratios = []
    for label, t in times.items():
        w, wo = statistics.median(t["with"]), statistics.median(t["without"])
        ratios.append(wo / w)
        lines = sources[label].count("\n")
        print(f"{label:24s} {lines:6d} {w:9.3f} {wo:12.3f} {wo / w:5.2f}x")
    print(f"geometric mean: {statistics.geometric_mean(ratios):.2f}x faster with the header")


if __name__ == "__main__":
    main(sys.argv[1:])

"""`MxKxN,...` on the command line of the benchmarks that time products of given shapes."""

from __future__ import annotations


def parse_shapes(text: str, tool: str, example: str) -> list[tuple[int, int, int]]:
    """[(m, k, n), ...] from "MxKxN,MxKxN"; SystemExit naming `tool` and the bad item."""
    shapes = []
    for item in text.split(","):
        parts = item.split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"{tool}: bad shape {item!r} (expected MxKxN, e.g. {example})")
        shapes.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return shapes

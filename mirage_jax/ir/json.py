"""Lossless JSON for kernel graphs, block graphs nested inside.

The format and its reader live in the C++ core (cc/ir/serialize.h): reading replays the builder
calls in order, so every IR rule is checked again and the rebuilt graph is identical (same
tensor ids, same to_json, same hash). Malformed documents raise ValueError naming the place.

graph.py's KernelGraph.to_json/from_json call these; this module does not import graph.py
(the graph class it rebuilds is passed in), so that the two do not import each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirage_jax import _core

if TYPE_CHECKING:
    from mirage_jax.ir.graph import KernelGraph

FORMAT = _core.GRAPH_JSON_FORMAT
VERSION = _core.GRAPH_JSON_VERSION


def kernel_graph_to_json(graph: KernelGraph) -> str:
    return str(graph._core.to_json())


def kernel_graph_from_json(text: str | bytes, kernel_graph: type[KernelGraph]) -> KernelGraph:
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"from_json: not valid JSON: {e}") from None
    if not isinstance(text, str):
        raise TypeError(f"from_json: expected a JSON string, got {type(text).__name__}")
    return kernel_graph._wrap(_core.KernelGraph.from_json(text))

"""Lossless JSON for kernel graphs, block graphs nested inside.

The format and its reader live in the C++ core (cc/ir/serialize.h): reading replays the builder
calls in order, so every IR rule is checked again and the rebuilt graph is identical (same
tensor ids, same to_json, same hash). Malformed documents raise ValueError naming the place.
"""

from __future__ import annotations

from mirage_jax import _core
from mirage_jax.graph import KernelGraph

FORMAT = _core.GRAPH_JSON_FORMAT
VERSION = _core.GRAPH_JSON_VERSION


def kernel_graph_to_json(graph: KernelGraph) -> str:
    return graph._core.to_json()


def kernel_graph_from_json(text: str | bytes) -> KernelGraph:
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"from_json: not valid JSON: {e}") from None
    if not isinstance(text, str):
        raise TypeError(f"from_json: expected a JSON string, got {type(text).__name__}")
    return KernelGraph._wrap(_core.KernelGraph.from_json(text))

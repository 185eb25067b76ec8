"""KernelGraph.evaluate: numpy arrays through the C++ reference interpreter (cc/interp)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mirage_jax import _core

if TYPE_CHECKING:
    from mirage_jax.ir.graph import KernelGraph
    from mirage_jax.ir.handles import Tensor

# The interpreter computes in exactly this float type; storage dtypes do not round values.
_ENTRY_POINTS: dict[str, Callable[[Any, list[np.ndarray]], list[Any]]] = {
    "float64": _core.evaluate_f64,
    "float32": _core.evaluate_f32,
}


def evaluate(graph: KernelGraph, inputs: Sequence[Any], dtype: str = "float64") -> list[np.ndarray]:
    if dtype not in _ENTRY_POINTS:
        raise ValueError(
            f"evaluate: unknown dtype {dtype!r} (expected one of {', '.join(_ENTRY_POINTS)})"
        )
    if isinstance(inputs, np.ndarray) or not isinstance(inputs, Sequence):
        raise TypeError(
            f"evaluate: 'inputs' must be a list of arrays, one per graph input, "
            f"got {type(inputs).__name__}"
        )
    expected = graph.inputs
    if len(inputs) != len(expected):
        raise ValueError(
            f"evaluate: {graph.label} has {len(expected)} inputs, got {len(inputs)} arrays"
        )
    arrays = [_to_array(x, t, i, dtype) for i, (x, t) in enumerate(zip(inputs, expected))]
    return _ENTRY_POINTS[dtype](graph._core, arrays)


def _to_array(value: object, tensor: Tensor, index: int, dtype: str) -> np.ndarray:
    try:
        array = np.ascontiguousarray(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"evaluate: input {index} ({tensor.name}) cannot be converted to a {dtype} array: {e}"
        ) from None
    if array.shape != tensor.shape:
        raise ValueError(
            f"evaluate: input {index} ({tensor.name}) has shape {tensor.shape} in the graph, "
            f"got an array of shape {array.shape}"
        )
    return array

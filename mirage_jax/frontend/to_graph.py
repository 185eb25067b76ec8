"""Converting a partition Region into a mirage_jax KernelGraph.

Each jaxpr value is tracked as a kernel-graph expression plus `axes` (mirage_jax/frontend/
expr.py): for every axis of the kernel tensor, the logical (jaxpr) axis it holds, or None for
a size-1 axis that holds none. Logical axes missing from `axes` are broadcast. This folds
broadcast_in_dim, size-1 reshapes, the dims that reductions keep, and convert_element_type
(dtype bookkeeping) away. Transposes of region inputs are folded into the input layout
(`GraphInput.perm`). How each primitive converts is its rule in
mirage_jax/frontend/primitives.py.

The graph is built as a small expression DAG first, normalized (mean, silu, gelu, square),
and then only what the outputs reach is emitted into the KernelGraph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mirage_jax.frontend import primitives
from mirage_jax.frontend.expr import Expr, Operand, RegionNotSupported, Value
from mirage_jax.frontend.flat import Lit, Var
from mirage_jax.frontend.partition import Region
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.ir.handles import Tensor

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


@dataclass(frozen=True)
class GraphInput:
    """Kernel-graph input i is `transpose(region.inputs[index], perm)` cast to `dtype`;
    its shape is `shape` (rank-0 inputs become shape (1,))."""

    index: int
    perm: tuple[int, ...] | None
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class GraphOutput:
    """Region output i is kernel output i reshaped to `reshape`, broadcast to `shape`, cast."""

    reshape: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: np.dtype[Any]


@dataclass
class RegionGraph:
    graph: KernelGraph
    inputs: list[GraphInput]  # in the graph's input order
    outputs: list[GraphOutput]  # in region.outputs order

    # `xp` is numpy or jax.numpy: the same layout changes on host arrays or in a jax trace.
    def prepare_inputs(self, region_inputs: Sequence[Any], xp: Any = np) -> list[Any]:
        """Region input values -> the graph's input values (layouts applied)."""
        out = []
        for gi in self.inputs:
            x = xp.asarray(region_inputs[gi.index])
            if gi.perm is not None:
                x = xp.transpose(x, gi.perm)
            out.append(xp.reshape(x, gi.shape))
        return out

    def finish_outputs(self, graph_outputs: Sequence[Any], xp: Any = np) -> list[Any]:
        """The graph's output values -> region output values."""
        return [
            xp.broadcast_to(xp.reshape(xp.asarray(y), o.reshape), o.shape).astype(o.dtype)
            for y, o in zip(graph_outputs, self.outputs)
        ]


class _Builder:
    """The region converter the primitive rules build on (primitives.Builder)."""

    def __init__(self, region: Region):
        self.region = region
        self.env: dict[Var, Operand] = {}
        self.inputs: dict[tuple[int, tuple[int, ...] | None], Expr] = {}  # (index, perm) -> Expr
        # id(Expr) of a reduce sum -> (source Expr, dim, count), for mean recognition
        self.sum_of: dict[int, tuple[Expr, int, float]] = {}

    def input(self, index: int, perm: tuple[int, ...] | None = None) -> Expr:
        key = (index, perm)
        if key not in self.inputs:
            v = self.region.inputs[index]
            if v.dtype.name not in _DTYPES:
                raise RegionNotSupported(f"input {v}: dtype {v.dtype.name} is not supported")
            shape = v.shape if perm is None else tuple(v.shape[p] for p in perm)
            if len(shape) > primitives.MAX_RANK or 0 in shape:
                raise RegionNotSupported(f"input {v}: shape {shape} is not supported")
            self.inputs[key] = Expr("input", [], key, shape or (1,))
        return self.inputs[key]

    def get(self, v: Var | Lit) -> Operand:
        if isinstance(v, Lit):
            if v.value.size != 1:
                raise RegionNotSupported(f"non-scalar literal of shape {v.shape}")
            return float(v.value.reshape(()))
        if v in self.env:
            return self.env[v]
        index = self.region.inputs.index(v)
        d = self.input(index)
        axes = tuple(range(len(v.shape))) if v.shape else (None,)
        return Value(d, axes, len(v.shape))

    def full(self, x: Operand, what: str) -> Value:
        if not isinstance(x, Value):
            raise RegionNotSupported(f"{what}: a scalar constant where a tensor is needed")
        return x

    def run(self) -> None:
        for node in self.region.nodes:
            rule = primitives.rule(node.name)
            if rule is None:
                raise RegionNotSupported(f"{node.name}: not a kernel-graph primitive")
            args = [self.get(v) for v in node.invars]
            out = node.outvars[0]
            self.env[out] = rule.convert(self, node, out, *args)


def region_to_graph(region: Region) -> RegionGraph:
    """Builds the KernelGraph of `region`, or raises RegionNotSupported."""
    # Constants fold as IEEE arithmetic does (primitives.fold), without numpy's warnings.
    with np.errstate(all="ignore"):
        return _region_to_graph(region)


def _region_to_graph(region: Region) -> RegionGraph:
    b = _Builder(region)
    b.run()
    outs: list[tuple[Value, GraphOutput]] = []
    for v in region.outputs:
        val = b.env[v]
        if not isinstance(val, Value):
            raise RegionNotSupported(f"output {v} is a constant")
        present = [a for a in val.axes if a is not None]
        if present != sorted(present):
            raise RegionNotSupported(f"output {v}: axes out of order")
        reshape = tuple(v.shape[i] if i in present else 1 for i in range(len(v.shape)))
        if len(v.shape) > 4 or len(val.d.shape) > 4:
            raise RegionNotSupported(f"output {v}: rank > 4")
        outs.append((val, GraphOutput(reshape, v.shape, v.dtype)))

    kg = KernelGraph()
    memo: dict[int, Tensor] = {}
    keys = sorted(b.inputs, key=lambda k: (k[0], k[1] is not None, k[1] or ()))
    graph_inputs = []
    for key in keys:
        d = b.inputs[key]
        v = region.inputs[key[0]]
        memo[id(d)] = kg.new_input(d.shape, _DTYPES[v.dtype.name])
        graph_inputs.append(GraphInput(key[0], key[1], d.shape, _DTYPES[v.dtype.name]))

    def emit(d: Expr) -> Tensor:
        known = memo.get(id(d))
        if known is not None:
            return known
        args = [emit(a) for a in d.args]
        t: Tensor
        if d.op == "unary":
            kind, c = d.attr
            if kind in ("mul_scalar", "add_scalar"):
                if not np.isfinite(np.float32(c)):  # kernels hold float32 constants
                    raise RegionNotSupported(f"{kind}: by {c}, not a finite float32 constant")
                t = getattr(kg, kind)(args[0], c)
            elif kind == "tanh":
                t = kg.add_scalar(kg.mul_scalar(kg.sigmoid(kg.mul_scalar(args[0], 2.0)), 2.0), -1.0)
            else:
                t = getattr(kg, kind)(args[0])
        elif d.op == "binary":
            t = getattr(kg, d.attr)(*args)
        elif d.op == "reduce":
            t = kg.reduce(args[0], d.attr[0], d.attr[1])
        elif d.op == "matmul":
            t = kg.matmul(*args)
        else:
            raise RegionNotSupported(f"internal: op {d.op}")
        memo[id(d)] = t
        return t

    try:
        for val, _ in outs:
            kg.mark_output(emit(val.d))
    except RegionNotSupported:
        raise
    except Exception as e:
        raise RegionNotSupported(f"kernel graph rejected the region: {e}") from e
    return RegionGraph(kg, graph_inputs, [o for _, o in outs])

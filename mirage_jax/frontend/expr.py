"""The expression DAG a region is converted into before its KernelGraph is emitted
(mirage_jax/frontend/to_graph.py), and the rewrites that normalize it.

An `Expr` is one kernel-graph op to be: "input", "unary" (attr: kind, scalar), "binary"
(attr: kind), "reduce" (attr: dim, kind) or "matmul". A `Value` is what a jaxpr value became:
an Expr plus `axes`, for every axis of the Expr's shape the logical (jaxpr) axis it holds, or
None for a size-1 axis that holds none. Logical axes missing from `axes` are broadcast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


class RegionNotSupported(Exception):
    """The region cannot be expressed as a kernel graph; `reason` names the primitive."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Expr:
    __slots__ = ("args", "attr", "op", "shape")

    def __init__(self, op: str, args: Any, attr: Any, shape: Any):
        self.op, self.args, self.attr, self.shape = op, tuple(args), attr, tuple(shape)


@dataclass
class Value:
    d: Expr
    axes: tuple[int | None, ...]  # per kernel axis: logical axis or None
    rank: int  # logical rank


# A converted operand: a Value, or a Python float for a scalar constant (folded as it goes).
Operand = Value | float


def broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise RegionNotSupported(f"internal: shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def unary(kind: str, d: Expr, scalar: float = 0.0) -> Expr:
    return Expr("unary", [d], (kind, float(scalar)), d.shape)


def binary(kind: str, a: Expr, b: Expr) -> Expr:
    return Expr("binary", [a, b], kind, broadcast_shapes(a.shape, b.shape))


def reduce(d: Expr, dim: int, kind: str) -> Expr:
    shape = list(d.shape)
    shape[dim] = 1
    return Expr("reduce", [d], (dim, kind), shape)


def aligned(v: Value, n: int) -> bool:
    """The kernel tensor, right-aligned against logical rank n, matches positionally."""
    k = len(v.axes)
    for j, a in enumerate(v.axes):
        pos = n - k + j
        if a is None:
            continue
        if a != pos:
            return False
    return True


def result_axes(shape: tuple[int, ...], n: int) -> tuple[int | None, ...]:
    k = len(shape)
    return tuple(None if shape[j] == 1 else n - k + j for j in range(k))


def scalar_op(d: Expr, kind: str) -> tuple[Expr, float] | None:
    """(operand, scalar) when d is the unary `kind` (mul_scalar, add_scalar), else None."""
    if d.op == "unary" and d.attr[0] == kind:
        return d.args[0], d.attr[1]
    return None


def is_cube(d: Expr, x: Expr) -> bool:
    """d is x·x·x as integer_pow(x, 3) builds it: mul(square(x), x), in either order."""
    if d.op != "binary" or d.attr != "mul":
        return False
    for sq, lin in (d.args, d.args[::-1]):
        if lin is x and sq.op == "unary" and sq.attr[0] == "square" and sq.args[0] is x:
            return True
    return False


def fuse_silu(a: Value, b: Value) -> Value | None:
    """x · sigmoid(x), in either order, as one silu."""
    for x, s in ((a, b), (b, a)):
        if (
            s.d.op == "unary"
            and s.d.attr[0] == "sigmoid"
            and s.d.args[0] is x.d
            and s.axes == x.axes
        ):
            return Value(unary("silu", x.d), x.axes, x.rank)
    return None


def fuse_gelu(a: Value, b: Value) -> Value | None:
    """x · 0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³))), jax.nn.gelu(approximate=True)."""
    for x, c in ((a, b), (b, a)):
        if c.axes != x.axes:
            continue
        d = c.d
        half = scalar_op(d, "mul_scalar")
        if not (half and np.isclose(half[1], 0.5)):
            continue
        one = scalar_op(half[0], "add_scalar")
        if not (one and np.isclose(one[1], 1.0)):
            continue
        t = one[0]
        if not (t.op == "unary" and t.attr[0] == "tanh"):
            continue
        scaled = scalar_op(t.args[0], "mul_scalar")
        if not (scaled and np.isclose(scaled[1], np.sqrt(2 / np.pi), rtol=1e-6)):
            continue
        inner = scaled[0]
        if inner.op != "binary" or inner.attr != "add" or x.d not in inner.args:
            continue
        other = inner.args[1] if inner.args[0] is x.d else inner.args[0]
        cubed = scalar_op(other, "mul_scalar")
        if not (cubed and np.isclose(cubed[1], 0.044715, rtol=1e-6) and is_cube(cubed[0], x.d)):
            continue
        return Value(unary("gelu", x.d), x.axes, x.rank)
    return None

"""The expression DAG a region is converted into before its KernelGraph is emitted
(mirage_jax/frontend/to_graph.py), and the rewrites that normalize it.

An `Expr` is one kernel-graph op to be: "input", "unary" (attr: kind, scalar), "binary"
(attr: kind), "select" (args: x, mask; attr: the fill), "reduce" (attr: dim, kind) or
"matmul"; its shape is the kernel tensor's. What a jaxpr value became is an `Operand`:
- a `Value`: an Expr plus its layout, the logical dims each of its axes holds
  (mirage_jax/frontend/layout.py);
- a `Lazy`: a layout change of a region input (transposes, reshapes, broadcasts, dtype
  changes), not laid out until a use needs it, XLA then preparing it at the boundary;
- a Python float: a scalar constant, folded as conversion goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

from mirage_jax.frontend.flat import Node
from mirage_jax.frontend.layout import Groups


class RegionNotSupported(Exception):
    """The region cannot be expressed as a kernel graph; `reason` names the primitive."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class LayoutConflict(RegionNotSupported):
    """`node` cannot take its operand `var` in the layout `var` was computed in (a transpose
    or regrouping of a computed value that no kernel layout expresses, operands that do not
    broadcast). The partitioner then cuts the region between the two: `var` becomes an input
    of `node`'s region, laid out there as `node` needs, and XLA copies it once between."""

    def __init__(self, reason: str, node: Any, var: Any):
        super().__init__(reason)
        self.node, self.var = node, var


class NodeNotSupported(RegionNotSupported):
    """`node` cannot be expressed even with every operand laid out as it needs: the
    partitioner leaves it out of the regions."""

    def __init__(self, reason: str, node: Any):
        super().__init__(reason)
        self.node = node


class Expr:
    __slots__ = ("args", "attr", "op", "shape")

    def __init__(self, op: str, args: Any, attr: Any, shape: Any):
        self.op, self.args, self.attr, self.shape = op, tuple(args), attr, tuple(shape)


@dataclass
class Value:
    """A value computed in the region: the kernel tensor `d` holding a logical value of
    `shape`, laid out as `groups` (one group of logical dims per axis of d)."""

    d: Expr
    groups: Groups
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Lazy:
    """A layout change of region input `index`: `chain` (layout-only nodes) applied to it,
    then the transposes `pending`, gives this value of logical `shape`. Transposes are held
    back so that they compose with the kernel layout's own into one (a transpose laid out
    transposed back is no copy at all)."""

    index: int
    chain: tuple[Node, ...]
    shape: tuple[int, ...]
    dtype: Any
    pending: tuple[Node, ...] = ()

    def then(self, node: Node) -> Lazy:
        out = node.outvars[0]
        if node.name == "transpose":
            return Lazy(self.index, self.chain, out.shape, out.dtype, (*self.pending, node))
        chain = (*self.chain, *self.pending, node)
        return Lazy(self.index, chain, out.shape, out.dtype)

    @property
    def perm(self) -> tuple[int, ...]:
        """The composed permutation of `pending`: logical dim i is dim perm[i] of the
        chain's result."""
        perm = tuple(range(len(self.shape)))
        for node in reversed(self.pending):
            p = node.params["permutation"]
            perm = tuple(p[i] for i in perm)
        return perm


# A converted operand (module doc).
Operand = Value | Lazy | float


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


def select(x: Expr, mask: Expr, c: float) -> Expr:
    return Expr("select", [x, mask], float(c), broadcast_shapes(x.shape, mask.shape))


def reduce(d: Expr, dim: int, kind: str) -> Expr:
    shape = list(d.shape)
    shape[dim] = 1
    return Expr("reduce", [d], (dim, kind), shape)


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
            and s.groups == x.groups
        ):
            return Value(unary("silu", x.d), x.groups, x.shape)
    return None


def is_constant(value: float, exact: float) -> bool:
    """`value` is the constant `exact` as a program of any kernel dtype holds it: jax.nn.gelu
    rounds √(2/π) and 0.044715 to its input's dtype (0.796875 and 0.044677734375 in
    bfloat16), and the kernel computes with the exact constant in float32, within that
    dtype's rounding of what XLA computes."""
    return any(
        np.isclose(value, float(np.asarray(exact, dtype)), rtol=1e-6)
        for dtype in (np.float32, jnp.bfloat16, np.float16)
    )


def fuse_gelu(a: Value, b: Value) -> Value | None:
    """x · 0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³))), jax.nn.gelu(approximate=True), its
    constants as the program's dtype holds them."""
    for x, c in ((a, b), (b, a)):
        if c.groups != x.groups:
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
        if not (scaled and is_constant(scaled[1], np.sqrt(2 / np.pi))):
            continue
        inner = scaled[0]
        if inner.op != "binary" or inner.attr != "add" or x.d not in inner.args:
            continue
        other = inner.args[1] if inner.args[0] is x.d else inner.args[0]
        cubed = scalar_op(other, "mul_scalar")
        if not (cubed and is_constant(cubed[1], 0.044715) and is_cube(cubed[0], x.d)):
            continue
        return Value(unary("gelu", x.d), x.groups, x.shape)
    return None


def fuse_gelu_erf(a: Value, b: Value) -> Value | None:
    """x · 0.5 · erfc(-x · 1/√2) as jax.nn.gelu(approximate=False) traces it (0.5 · x times
    erfc of neg(x) scaled by 1/√2, in either order), its constant as the program's dtype holds
    it."""
    for half_x, e in ((a, b), (b, a)):
        if half_x.groups != e.groups:
            continue
        half = scalar_op(half_x.d, "mul_scalar")
        if not (half and np.isclose(half[1], 0.5)):
            continue
        x = half[0]
        if not (e.d.op == "unary" and e.d.attr[0] == "erfc"):
            continue
        scaled = scalar_op(e.d.args[0], "mul_scalar")
        if scaled is None:
            continue
        arg, c = scaled
        if arg.op == "unary" and arg.attr[0] == "neg" and arg.args[0] is x:
            c = -c
        elif arg is not x:
            continue
        if not is_constant(-c, np.sqrt(0.5)):
            continue
        return Value(unary("gelu_erf", x), half_x.groups, half_x.shape)
    return None


def non_negative(d: Expr) -> bool:
    """d is never below 0 for any input (it may be NaN): squares, exponentials, their sums,
    means, maxima and products, scaled by c >= 0 or shifted by c >= 0. What lets
    max(0, var), the clamp of a variance, be the variance itself."""
    if d.op == "unary":
        kind, c = d.attr
        if kind in ("square", "exp", "sqrt", "rsqrt", "sigmoid", "relu", "erfc"):
            return True
        if kind in ("mul_scalar", "add_scalar") and c >= 0:
            return non_negative(d.args[0])
        return False
    if d.op == "reduce":
        return non_negative(d.args[0])
    if d.op == "binary" and d.attr in ("add", "mul"):
        return all(non_negative(a) for a in d.args)
    return False

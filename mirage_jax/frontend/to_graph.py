"""Converting a partition Region into a mirage_jax KernelGraph.

Each jaxpr value becomes an operand (mirage_jax/frontend/expr.py): a computed `Value`, a kernel
expression with its layout (which logical dims each kernel axis holds, mirage_jax/frontend/
layout.py); a `Lazy` layout change of a region input, laid out at each use as the use needs;
or a folded scalar constant. How each primitive converts is its rule in
mirage_jax/frontend/primitives.py.

Layouts are chosen as conversion goes: a computed value's where it is computed, a lazy value's
where it is used. A value first laid out with nothing to go by takes the "fold" policy (the
leading dims of an activation on one axis of rows); when that cannot lay the region out, the
"split" policy (one axis per dim) is tried, and "fold-swapped" (rows on the last axis); of
those that lay it out, the one copying fewest elements is used. What XLA must copy at the
region's boundary (a transposed or broadcast input, a transposed output) is counted in
`RegionGraph.copies`.

The graph is built as a small expression DAG first, normalized (mean, silu, gelu, square),
and then only what the outputs reach is emitted into the KernelGraph.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

from mirage_jax.frontend import layout as _layout
from mirage_jax.frontend import primitives
from mirage_jax.frontend.expr import (
    Expr,
    LayoutConflict,
    Lazy,
    NodeNotSupported,
    Operand,
    RegionNotSupported,
    Value,
)
from mirage_jax.frontend.flat import Lit, Node, Var, run_nodes
from mirage_jax.frontend.layout import Groups, Presentation, Unlayout
from mirage_jax.frontend.region import Region
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.ir.handles import Tensor

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}
POLICIES = ("fold", "split", "fold-swapped")


@dataclass(frozen=True)
class GraphInput:
    """Kernel-graph input i is region input `index` put through `chain` (layout-only nodes),
    broadcast to `expand`, transposed by `perm` (None: not), reshaped to `shape`; its dtype
    is `dtype`."""

    index: int
    chain: tuple[Node, ...]
    expand: tuple[int, ...]
    perm: tuple[int, ...] | None
    shape: tuple[int, ...]
    dtype: str
    copies: int  # elements XLA copies to prepare it (0: a reshape)


@dataclass(frozen=True)
class GraphOutput:
    """How region output i is made: from kernel output `kernel` laid back out (`unlayout`);
    a constant (`kernel` None, `lazy` None); or, for an output that is only a layout change
    of an input, from that input (`lazy`). Cast to `dtype`."""

    kernel: int | None
    unlayout: Unlayout | None
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    constant: float = 0.0
    lazy: Lazy | None = None
    copies: int = 0  # elements XLA copies to lay it back out


def _run_chain(region: Region, index: int, chain: tuple[Node, ...], value: Any) -> Any:
    """Region input `index`'s `value` put through the layout nodes `chain`, by jax."""
    if not chain:
        return value
    env = {region.inputs[index]: value}
    run_nodes(chain, env)
    return env[chain[-1].outvars[0]]


@dataclass
class RegionGraph:
    graph: KernelGraph
    inputs: list[GraphInput]  # in the graph's input order
    outputs: list[GraphOutput]  # in region.outputs order
    region: Region
    policy: str = "fold"

    @property
    def copies(self) -> int:
        """Elements XLA copies at the region's boundary to lay its inputs and outputs out
        (transposes and materialized broadcasts; reshapes are free)."""
        return sum(g.copies for g in self.inputs) + sum(o.copies for o in self.outputs)

    @property
    def as_written(self) -> bool:
        """Whether XLA runs the graph as the model's own program: laid out by the "fold"
        policy (an activation's leading dims folded into rows, a matmul's operands in the
        model's order) with no copies at the boundary. A swapped layout (tied logits
        `h @ wte.T` as `wte @ h.T`) is a different program to XLA even without copies."""
        return self.policy == "fold" and self.copies == 0

    def layout_ops(self) -> list[str]:
        """Each copy at the boundary, described (what `explain` reports)."""
        out = []
        for i, g in enumerate(self.inputs):
            if g.copies:
                v = self.region.inputs[g.index]
                out.append(f"input {i} ({v}) laid out as {list(g.shape)}: {g.copies} elements")
        for i, o in enumerate(self.outputs):
            if o.copies:
                v = self.region.outputs[i]
                out.append(f"output {i} ({v}) laid back out: {o.copies} elements")
        return out

    # `xp` is numpy or jax.numpy: the same layout changes on host arrays or in a jax trace.
    def prepare_inputs(
        self, region_inputs: Sequence[Any], xp: Any = np, reshape: bool = True
    ) -> list[Any]:
        """Region input values -> the graph's input values (layouts applied). With `reshape`
        False, an input whose layout is a reshape alone is left in its own shape (for
        `Superoptimized.call_reshaped`)."""
        out = []
        for gi in self.inputs:
            x = region_inputs[gi.index]
            if gi.chain:
                x = _run_chain(self.region, gi.index, gi.chain, jnp.asarray(x))
            x = xp.asarray(x)
            if not reshape and gi.copies == 0:
                out.append(x)
                continue
            if tuple(x.shape) != gi.expand:
                x = xp.broadcast_to(x, gi.expand)
            if gi.perm is not None:
                x = xp.transpose(x, gi.perm)
            out.append(xp.reshape(x, gi.shape))
        return out

    def output_shapes(self) -> list[tuple[int, ...]]:
        """The shape to ask of each graph output: the one its region output has before any
        broadcast, where laying it back out is a reshape, else the graph's own."""
        shapes = [tuple(t.shape) for t in self.graph.outputs]
        claimed: set[int] = set()
        for o in self.outputs:
            u = o.unlayout
            if o.kernel is None or o.kernel in claimed or u is None or not u.is_reshape:
                continue
            claimed.add(o.kernel)
            shapes[o.kernel] = u.unsqueezed
        return shapes

    def finish_outputs(
        self,
        graph_outputs: Sequence[Any],
        region_inputs: Sequence[Any] | None = None,
        xp: Any = np,
    ) -> list[Any]:
        """The graph's output values -> region output values (`region_inputs` needed only
        for outputs that are layout changes of inputs)."""
        out = []
        for o in self.outputs:
            if o.lazy is not None:
                if region_inputs is None:
                    raise ValueError("finish_outputs: this region needs its input values")
                value = jnp.asarray(region_inputs[o.lazy.index])
                chain = (*o.lazy.chain, *o.lazy.pending)
                y = _run_chain(self.region, o.lazy.index, chain, value)
                y = xp.asarray(y)
            elif o.kernel is None:
                y = xp.full(o.shape, o.constant)
            else:
                u = o.unlayout
                assert u is not None
                y = xp.reshape(xp.asarray(graph_outputs[o.kernel]), u.split)
                y = xp.reshape(xp.transpose(y, u.perm), u.unsqueezed)
            out.append(xp.broadcast_to(y, o.shape).astype(o.dtype))
        return out


class _Builder:
    """The region converter the primitive rules build on (primitives.Builder)."""

    def __init__(self, region: Region, policy: str):
        self.region = region
        self.policy = policy
        self.env: dict[Var, Operand] = {}
        # (index, chain, groups, expand) -> (its Expr, its GraphInput)
        self.inputs: dict[tuple[Any, ...], tuple[Expr, GraphInput]] = {}
        # id(Expr) of a reduce sum -> (source Expr, dim, count), for mean recognition
        self.sum_of: dict[int, tuple[Expr, int, float]] = {}
        self.consumers: dict[Var, list[Node]] = {}
        for n in region.nodes:
            for v in n.invars:
                if isinstance(v, Var):
                    self.consumers.setdefault(v, []).append(n)

    # -- operands ------------------------------------------------------------------------

    def get(self, v: Var | Lit) -> Operand:
        if isinstance(v, Lit):
            if v.value.size != 1:
                raise RegionNotSupported(f"non-scalar literal of shape {v.shape}")
            return float(v.value.reshape(()))
        if v in self.env:
            return self.env[v]
        index = self.region.inputs.index(v)
        return Lazy(index, (), v.shape, v.dtype)

    def place(self, x: Lazy, groups: Groups, sizes: Sequence[int] | None = None) -> Value:
        """`x` laid out as `groups` (dims of size 1 in x but not in `sizes` materialized)."""
        p: Presentation = _layout.presentation(groups, x.shape, sizes or x.shape)
        dtype = np.dtype(x.dtype).name
        if dtype not in _DTYPES:
            raise RegionNotSupported(
                f"input {self.region.inputs[x.index]}: dtype {dtype} is not supported"
            )
        if len(p.shape) > _layout.MAX_RANK or 0 in p.shape:
            raise RegionNotSupported(f"input {x}: kernel shape {p.shape} is not supported")
        # in the frame of the chain's result, before x's held-back transposes
        held_back = x.perm
        expand = [0] * len(held_back)
        for i, d in enumerate(held_back):
            expand[d] = p.expand[i]
        perm = tuple(held_back[d] for d in p.perm)
        moved = [d for d in perm if expand[d] != 1]
        free = not p.materialized and moved == sorted(moved)
        key = (x.index, tuple(id(n) for n in x.chain), perm, tuple(expand), p.shape)
        if key not in self.inputs:
            gi = GraphInput(
                x.index,
                x.chain,
                tuple(expand),
                None if perm == tuple(range(len(perm))) else perm,
                p.shape,
                _DTYPES[dtype],
                0 if free else p.elements,
            )
            self.inputs[key] = (Expr("input", [], len(self.inputs), p.shape), gi)
        return Value(self.inputs[key][0], groups, p.expand)

    def laid_out(self, x: Operand, what: str, reduced: Sequence[int] = ()) -> Value:
        """`x` as a computed Value: a lazy one laid out by the builder's policy (with the
        dims `reduced` on axes of their own)."""
        if isinstance(x, Value):
            return x
        if isinstance(x, Lazy):
            groups = _layout.canonical(x.shape, self.policy, reduced)
            if groups is None:
                raise RegionNotSupported(f"{what}: no kernel layout of rank <= 4 for {x.shape}")
            return self.place(x, groups)
        raise RegionNotSupported(f"{what}: a scalar constant where a tensor is needed")

    def full(self, x: Operand, what: str) -> Value:
        return self.laid_out(x, what)

    def conflict(self, node: Node, operand: int, why: str) -> LayoutConflict:
        v = node.invars[operand]
        return LayoutConflict(f"{node.name}: {why}", node, v)

    def unsupported(self, node: Node, why: str) -> NodeNotSupported:
        return NodeNotSupported(f"{node.name}: {why}", node)

    def run(self) -> None:
        for node in self.region.nodes:
            rule = primitives.rule(node.name)
            if rule is None:
                raise self.unsupported(node, "not a kernel-graph primitive")
            args = [self.get(v) for v in node.invars]
            out = node.outvars[0]
            self.env[out] = rule.convert(self, node, out, *args)


def region_to_graph(region: Region) -> RegionGraph:
    """Builds the KernelGraph of `region`, or raises RegionNotSupported (a LayoutConflict or
    NodeNotSupported when cutting the region or leaving a node out would help). Of the
    policies that lay it out, the first that copies fewest elements at the boundary wins."""
    first: RegionNotSupported | None = None
    best: RegionGraph | None = None
    for policy in POLICIES:
        try:
            # Constants fold as IEEE arithmetic does (primitives.fold), without numpy's warnings.
            with np.errstate(all="ignore"):
                rg = _convert(region, policy)
        except RegionNotSupported as e:
            first = first or e
            continue
        if best is None or rg.copies < best.copies:
            best = rg
        if best.copies == 0:  # nothing left to save: later policies cannot do better
            break
    if best is not None:
        return best
    assert first is not None
    raise first


def _convert(region: Region, policy: str) -> RegionGraph:
    b = _Builder(region, policy)
    b.run()
    outs: list[tuple[Value | None, GraphOutput]] = []
    # Region outputs computed by the same expression share one graph output: a bf16 residual
    # and its float32 convert for the next norm are one value (the convert is the boundary's
    # astype), and a graph that outputs one tensor twice needs a second kernel op to write it
    # again, so the one-kernel search found nothing for every such region.
    kernel_index: dict[int, int] = {}
    for v in region.outputs:
        val = b.env[v]
        if isinstance(val, Lazy):
            outs.append((None, GraphOutput(None, None, v.shape, v.dtype, lazy=val)))
        elif not isinstance(val, Value):
            outs.append((None, GraphOutput(None, None, v.shape, v.dtype, constant=val)))
        else:
            u = _layout.unlayout(val.groups, v.shape)
            copies = 0 if u.is_free else int(np.prod(v.shape))
            first = id(val.d) not in kernel_index
            index = kernel_index.setdefault(id(val.d), len(kernel_index))
            output = GraphOutput(index, u, v.shape, v.dtype, copies=copies)
            outs.append((val if first else None, output))
    kernel_outputs = len(kernel_index)
    if not kernel_outputs:
        raise RegionNotSupported("no output is computed in the region")

    reached: set[int] = set()
    stack = [val.d for val, _ in outs if val is not None]
    while stack:
        d = stack.pop()
        if id(d) not in reached:
            reached.add(id(d))
            stack.extend(d.args)
    kg = KernelGraph()
    memo: dict[int, Tensor] = {}
    graph_inputs = []
    for d, gi in b.inputs.values():
        if id(d) in reached:
            memo[id(d)] = kg.new_input(d.shape, gi.dtype)
            graph_inputs.append(gi)

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
        elif d.op == "select":
            t = kg.select(args[0], args[1], d.attr)
        elif d.op == "reduce":
            t = kg.reduce(args[0], d.attr[0], d.attr[1])
        elif d.op == "matmul":
            t = kg.matmul(*args)
        else:
            raise RegionNotSupported(f"internal: op {d.op}")
        memo[id(d)] = t
        return t

    try:
        for out_val, _ in outs:
            if out_val is not None:
                kg.mark_output(emit(out_val.d))
    except RegionNotSupported:
        raise
    except Exception as e:
        raise RegionNotSupported(f"kernel graph rejected the region: {e}") from e
    return RegionGraph(kg, graph_inputs, [o for _, o in outs], region, policy)

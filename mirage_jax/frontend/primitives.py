"""The jaxpr primitives the frontend takes: ONE rule per primitive, in the style of jax's own
rule registries (jvp, batching, lowering rules keyed by primitive).

A rule says, for one primitive:
- admit: whether a node of it may join a region, or why not (the partitioner's question,
  mirage_jax/frontend/partition.py);
- convert: how it becomes kernel-graph expressions (mirage_jax/frontend/to_graph.py);
- factors: which dims of its operands and results must be split alike across devices, and
  which are reduced over (mirage_jax/frontend/factors.py);
- flops: the floating-point operations it does as written (min_region_flops, reports).
Every pass reads this table; a primitive missing from it stays outside every region.

Adding an elementwise jaxpr primitive that maps to one kernel-graph op is one `_register`
line at the bottom (plus the op in the IR, when it is new there).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from math import erf, erfc, prod
from typing import Any, Protocol

import jax.numpy as jnp
import numpy as np
from jax import lax

from mirage_jax.frontend import dot, expr
from mirage_jax.frontend import layout as _layout
from mirage_jax.frontend.expr import (
    Expr,
    LayoutConflict,
    Lazy,
    NodeNotSupported,
    Operand,
    RegionNotSupported,
    Value,
)
from mirage_jax.frontend.flat import Lit, Node, Var
from mirage_jax.frontend.layout import Groups

KERNEL_DTYPES = ("float32", "bfloat16", "float16")  # of every kernel-graph tensor
INTEGER_POWERS = (-2, -1, 1, 2, 3, 4)


class Builder(Protocol):
    """What a convert rule may use of the region converter (to_graph._Builder)."""

    region: Any  # region.Region
    policy: str  # "fold" or "split" (layout.canonical)
    env: dict[Var, Operand]
    sum_of: dict[int, tuple[Expr, int, float]]
    consumers: dict[Var, list[Node]]

    def place(self, x: Lazy, groups: Groups, sizes: Sequence[int] | None = None) -> Value: ...

    def laid_out(self, x: Operand, what: str, reduced: Sequence[int] = ()) -> Value: ...

    def conflict(self, node: Node, operand: int, why: str) -> LayoutConflict: ...

    def unsupported(self, node: Node, why: str) -> NodeNotSupported: ...


class Links(Protocol):
    """What a factors rule may use: a union-find over (var, dim) keys."""

    def union(self, a: Hashable, b: Hashable) -> None: ...


Admit = Callable[[Node, dict[Var, Node]], "str | None"]
Convert = Callable[..., Operand]  # (builder, node, out, *operands) -> the result
Factors = Callable[[Node, Links, list[tuple[Var, int]]], str]
Flops = Callable[[Node], int]


@dataclass(frozen=True)
class Rule:
    name: str
    admit: Admit
    convert: Convert
    factors: Factors
    flops: Flops
    # A region is worth a search only when it holds one of these (a matmul or a reduction).
    anchor: bool = False


RULES: dict[str, Rule] = {}


def rule(name: str) -> Rule | None:
    return RULES.get(name)


# -- helpers the rules share -------------------------------------------------------------


def is_float(dtype: Any) -> bool:
    """A floating dtype, numpy's or ml_dtypes' (bfloat16's numpy kind is "V")."""
    return bool(jnp.issubdtype(dtype, jnp.floating))


def is_neg_inf(v: Var | Lit) -> bool:
    return isinstance(v, Lit) and v.value.size == 1 and bool(np.isneginf(v.value.reshape(())))


def is_zero(v: Var | Lit) -> bool:
    return isinstance(v, Lit) and v.value.size == 1 and float(v.value.reshape(())) == 0.0


def _non_unit(shape: tuple[int, ...]) -> list[int]:
    return [i for i, s in enumerate(shape) if s != 1]


def _size1_reshape(node: Node) -> tuple[dict[int, int] | None, str]:
    """A kernel graph has no reshape: only size-1 dims may come and go. (old dim -> new dim
    of every non-size-1 dim, "") or (None, why the reshape is not of that kind)."""
    src, dst = node.invars[0].shape, node.outvars[0].shape
    old, new = _non_unit(src), _non_unit(dst)
    if [src[i] for i in old] != [dst[j] for j in new]:
        return None, f"{node.name}: {tuple(src)} -> {tuple(dst)} regroups dims"
    if node.params.get("dimensions") not in (None, ()):
        return None, f"{node.name}: with a dimensions permutation"
    return dict(zip(old, new)), ""


def _size(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape))


def fold(f: Callable[..., Any], out: Var, *constants: float) -> float:
    """`f` of scalar constants as IEEE arithmetic gives it (x/0 = inf, 0/0 = nan, never a
    Python exception or warning), rounded to the result's dtype like jax's own op."""
    with np.errstate(all="ignore"):
        value = f(*(np.float64(c) for c in constants))
        return float(np.asarray(value, np.float64).astype(out.dtype))


# -- admit -------------------------------------------------------------------------------


def admit_reason(node: Node, producers: dict[Var, Node]) -> str | None:
    """None when `node` may join a region, otherwise why not."""
    name = node.name
    values = [v for v in node.invars + node.outvars if isinstance(v, Var)]
    for v in values:  # what a kernel-graph tensor can be: a region's inputs are these too
        if 0 in v.shape:
            return f"{name}: operand {v} has no elements"
        if name == "convert_element_type" and v is node.invars[0]:
            continue  # converted by XLA before the kernel, from any dtype (an int mask)
        if name == "select_n" and v is node.invars[0]:
            continue  # a boolean mask, made 0/1 floats by XLA before the kernel
        if getattr(v.dtype, "name", None) not in KERNEL_DTYPES:
            return f"{name}: operand {v} of dtype {v.dtype} (kernels take {KERNEL_DTYPES})"
    found = RULES.get(name)
    if found is None:
        return f"{name}: not a kernel-graph primitive"
    return found.admit(node, producers)


def _admit(node: Node, producers: dict[Var, Node]) -> str | None:
    return None


def _admit_reshape(node: Node, producers: dict[Var, Node]) -> str | None:
    if node.params.get("dimensions") not in (None, ()):
        return f"{node.name}: with a dimensions permutation"
    return None


def _admit_convert(node: Node, producers: dict[Var, Node]) -> str | None:
    if not is_float(node.outvars[0].dtype):
        return "convert_element_type: to a non-float dtype"
    return None


def _admit_integer_pow(node: Node, producers: dict[Var, Node]) -> str | None:
    if node.params["y"] in INTEGER_POWERS:
        return None
    return f"integer_pow: y={node.params['y']}"


def _admit_max(node: Node, producers: dict[Var, Node]) -> str | None:
    if any(is_neg_inf(v) or is_zero(v) for v in node.invars):
        # max(-inf, m) stabilizes a softmax; max(0, v) clamps a variance (eqx.nn.LayerNorm)
        return None
    return "max: only max(-inf, x) of a softmax stabilizer or max(0, x) of x >= 0"


def _admit_select_n(node: Node, producers: dict[Var, Node]) -> str | None:
    if isinstance(node.invars[0], Lit):
        return None  # jnp.var's where(n - ddof > 0, ...), its predicate folded (flat._fold)
    if len(node.invars) == 3 and node.invars[0].dtype == np.bool_:
        return None  # jnp.where(mask, x, c): a select, when one case is a constant
    return "select_n: on a non-boolean predicate, or of more than two cases"


def _admit_conv(node: Node, producers: dict[Var, Node]) -> str | None:
    return dot.patch_conv_reason(node) or None


# -- convert: layouts --------------------------------------------------------------------


def _convert_identity(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    return x


def _convert_element_type(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    """A Value keeps its kernel tensor (its dtype is the kernel's business); a lazy input
    changes dtype in XLA, before the kernel (an int mask becomes a float input)."""
    return x.then(node) if isinstance(x, Lazy) else x


def _convert_broadcast_in_dim(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    if isinstance(x, Lazy):
        return x.then(node)
    if not isinstance(x, Value):
        return x
    bd = node.params["broadcast_dimensions"]
    src = node.invars[0].shape
    # a dim of size 1 stretched to full size is broadcast, no longer held
    kept = {d: bd[d] for d in range(len(src)) if src[d] == out.shape[bd[d]]}
    groups = _layout.relabel(x.groups, kept)
    new = [j for j in range(len(out.shape)) if j not in bd and out.shape[j] == 1]
    return Value(x.d, _layout.with_placeholders(groups, new, out.shape), out.shape)


def _convert_reshape(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    if isinstance(x, Lazy):
        return x.then(node)
    if not isinstance(x, Value):
        return x
    src = node.invars[0].shape
    groups = _layout.reshape(x.groups, src, out.shape)
    if groups is None:
        raise b.conflict(
            node,
            0,
            f"{tuple(src)} -> {tuple(out.shape)} regroups dims that its computed "
            f"operand holds apart (kernel layout {x.groups})",
        )
    return Value(x.d, groups, out.shape)


def _convert_transpose(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    """A computed value's transpose renames the dims its axes hold: no data moves."""
    if isinstance(x, Lazy):
        return x.then(node)
    if not isinstance(x, Value):
        return x
    perm = node.params["permutation"]
    return Value(x.d, _layout.relabel(x.groups, {p: j for j, p in enumerate(perm)}), out.shape)


# -- convert: arithmetic -----------------------------------------------------------------

# jaxpr primitive -> (kernel-graph unary op, its value on a constant, for folding)
_UNARY: dict[str, tuple[str, Callable[[np.float64], Any]]] = {
    "exp": ("exp", np.exp),
    "sqrt": ("sqrt", np.sqrt),
    "rsqrt": ("rsqrt", lambda c: 1.0 / np.sqrt(c)),
    "logistic": ("sigmoid", lambda c: 1.0 / (1.0 + np.exp(-c))),
    "neg": ("neg", np.negative),
    "square": ("square", np.square),
    "erf": ("erf", erf),
    "erfc": ("erfc", erfc),
}


def _convert_unary(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    kind, folded = _UNARY[node.name]
    if isinstance(x, float):  # constant folding
        return fold(folded, out, x)
    v = b.laid_out(x, node.name)
    return Value(expr.unary(kind, v.d), v.groups, v.shape)


def _convert_tanh(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    """tanh(z) = 2·sigmoid(2z) - 1: emitted so (a kernel graph has no tanh); kept as one
    "tanh" node until then, so that gelu's tanh form can be recognized."""
    if isinstance(x, float):
        return fold(np.tanh, out, x)
    v = b.laid_out(x, node.name)
    return Value(expr.unary("tanh", v.d), v.groups, v.shape)


def _convert_integer_pow(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    y = node.params["y"]
    if isinstance(x, float):
        return fold(lambda c: c**y, out, x)
    v = b.laid_out(x, node.name)
    d = v.d
    sq = expr.unary("square", d)
    table = {
        1: d,
        2: sq,
        3: expr.binary("mul", sq, d),
        4: expr.unary("square", sq),
        -1: expr.unary("recip", d),
        -2: expr.unary("recip", sq),
    }
    if y not in table:
        raise b.unsupported(node, f"y={y}")
    return Value(table[y], v.groups, v.shape)


def _convert_select_n(b: Builder, node: Node, out: Var, which: Operand, *cases: Operand) -> Operand:
    """A folded predicate picks its case; jnp.where(mask, x, c) (select_n(mask, c, x)) and
    jnp.where(mask, c, x) become select(x, mask, c), the mask an input made 0/1 floats (and
    negated for the second form) by XLA before the kernel."""
    predicate = node.invars[0]
    if isinstance(predicate, Lit):
        return cases[int(predicate.value.reshape(()))]
    if not isinstance(which, Lazy):
        raise b.unsupported(node, "on a mask computed in the region")
    false_case, true_case = cases
    if isinstance(false_case, float) and not isinstance(true_case, float):
        x, c, negate = true_case, false_case, False
    elif isinstance(true_case, float) and not isinstance(false_case, float):
        x, c, negate = false_case, true_case, True
    else:
        raise b.unsupported(node, "where neither case, or both, is a constant")
    if not np.isfinite(np.asarray(c, out.dtype)):
        raise b.unsupported(node, f"with fill {c} (kernels hold finite constants)")
    mask = _mask_as_float(b, which, negate, out.dtype)
    xv, mv, groups = _pair(b, node, out, x, mask)
    return Value(expr.select(xv.d, mv.d, c), groups, out.shape)


def _mask_as_float(b: Builder, mask: Lazy, negate: bool, dtype: Any) -> Lazy:
    """A boolean mask (negated if asked) as 0/1 of `dtype`: layout nodes XLA runs before the
    kernel, as it does for an input's transposes."""
    for primitive, params, out_dtype in (
        *((lax.not_p, {}, np.dtype(np.bool_)),) * negate,
        (
            lax.convert_element_type_p,
            {"new_dtype": dtype, "weak_type": False, "sharding": None},
            dtype,
        ),
    ):
        nodes = (*mask.chain, *mask.pending)
        src = nodes[-1].outvars[0] if nodes else b.region.inputs[mask.index]
        var = Var(-1, mask.shape, out_dtype)
        node = Node(-1, primitive, params, [src], [var], "")
        mask = mask.then(node)
    return mask


def _convert_max(b: Builder, node: Node, out: Var, a: Operand, c: Operand) -> Operand:
    for lit, other in ((node.invars[0], c), (node.invars[1], a)):
        if is_neg_inf(lit) and not isinstance(other, float):
            return other  # max(-inf, m): the softmax stabilizer's guard
        if is_zero(lit) and isinstance(other, Value) and expr.non_negative(other.d):
            return other  # max(0, v) of a v that is >= 0 or NaN (max keeps NaN too)
        if is_zero(lit) and not isinstance(other, float):
            # relu, NaN kept as max keeps it; Flax's LayerNorm clamps its variance so.
            v = b.laid_out(other, node.name)
            return Value(expr.unary("relu", v.d), v.groups, v.shape)
    raise b.unsupported(node, "only max(-inf, x) and max(0, x)")


def _convert_binary(b: Builder, node: Node, out: Var, x: Operand, y: Operand) -> Operand:
    kind = node.name
    if isinstance(x, float) and isinstance(y, float):
        ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
        return fold(ops[kind], out, x, y)
    if isinstance(y, float):
        return _tensor_op_constant(b, kind, b.laid_out(x, kind), y, out.shape)
    if isinstance(x, float):
        return _constant_op_tensor(kind, x, b.laid_out(y, kind), out.shape)
    a, c, groups = _pair(b, node, out, x, y)
    return _binary_of_tensors(kind, a, c, groups, out.shape)


def _pair(b: Builder, node: Node, out: Var, x: Operand, y: Operand) -> tuple[Value, Value, Groups]:
    """Both operands of an elementwise op laid out to broadcast against each other, and the
    result's layout. A lazy operand takes the other's layout (broadcasting what it lacks
    within an axis); two lazy ones, a fresh layout for the result's shape."""
    so = out.shape
    x, y = (_promoted(b, v, len(so)) for v in (x, y))
    if isinstance(x, Lazy) and isinstance(y, Lazy):
        target = _layout.canonical(so, b.policy)
        if target is None:
            raise b.unsupported(node, f"no kernel layout of rank <= 4 for {so}")
        placed = []
        for v in (x, y):
            g = _layout.present(target, v.shape, so)
            assert g is not None
            placed.append(b.place(v, g, so))
        x, y = placed
    elif isinstance(x, Lazy) or isinstance(y, Lazy):
        lazy_first = isinstance(x, Lazy)
        lz, val = (x, y) if lazy_first else (y, x)
        assert isinstance(lz, Lazy) and isinstance(val, Value)
        g = _layout.present(val.groups, lz.shape, so)
        if g is None:
            raise b.conflict(node, 1 if lazy_first else 0, f"no layout meets {val.groups}")
        placed_lz = b.place(lz, g, so)
        x, y = (placed_lz, val) if lazy_first else (val, placed_lz)
    assert isinstance(x, Value) and isinstance(y, Value)
    groups = _layout.merge(x.groups, x.shape, y.groups, y.shape, so)
    if groups is None:
        smaller = 0 if prod(x.d.shape) <= prod(y.d.shape) else 1
        raise b.conflict(
            node, smaller, f"operands laid out as {x.groups} and {y.groups} do not broadcast"
        )
    return x, y, groups


def _promoted(b: Builder, x: Operand, rank: int) -> Operand:
    """A rank-0 lazy operand of an op of higher rank (jaxpr lets a scalar meet a tensor):
    reshaped by XLA to `rank` dims of size 1, so that layouts can name its dims."""
    if not isinstance(x, Lazy) or len(x.shape) == rank:
        return x
    assert not x.shape, x.shape
    nodes = (*x.chain, *x.pending)
    src = nodes[-1].outvars[0] if nodes else b.region.inputs[x.index]
    ones = (1,) * rank
    node = Node(
        -1,
        lax.broadcast_in_dim_p,
        {"shape": ones, "broadcast_dimensions": (), "sharding": None},
        [src],
        [Var(-1, ones, x.dtype)],
        "",
    )
    return x.then(node)


def _tensor_op_constant(b: Builder, kind: str, x: Value, c: float, so: tuple[int, ...]) -> Value:
    if kind == "div":
        s = b.sum_of.get(id(x.d))
        if s is not None and np.isclose(c, s[2], rtol=1e-6):
            return Value(expr.reduce(s[0], s[1], "mean"), x.groups, so)
        with np.errstate(all="ignore"):  # x/0 is x·inf, as in IEEE
            inverse = np.float32(1.0) / np.float32(c)
        if not np.isfinite(inverse):
            raise RegionNotSupported(f"div: by {c} (kernels hold finite float32 constants only)")
        if np.isfinite(c) and c != 0 and not abs(inverse) >= np.finfo(np.float32).tiny:
            # x·(1/c) would not round like x/c: 1/c is subnormal in float32 (or 0).
            raise RegionNotSupported(f"div: by {c}, whose reciprocal float32 cannot hold")
        return Value(expr.unary("mul_scalar", x.d, float(inverse)), x.groups, so)
    d = {
        "add": lambda: expr.unary("add_scalar", x.d, c),
        "sub": lambda: expr.unary("add_scalar", x.d, -c),
        "mul": lambda: expr.unary("mul_scalar", x.d, c),
    }[kind]()
    return Value(d, x.groups, so)


def _constant_op_tensor(kind: str, c: float, y: Value, so: tuple[int, ...]) -> Value:
    d = {
        "add": lambda: expr.unary("add_scalar", y.d, c),
        "sub": lambda: expr.unary("add_scalar", expr.unary("neg", y.d), c),
        "mul": lambda: expr.unary("mul_scalar", y.d, c),
        "div": lambda: (
            expr.unary("recip", y.d)
            if c == 1.0
            else expr.unary("mul_scalar", expr.unary("recip", y.d), c)
        ),
    }[kind]()
    return Value(d, y.groups, so)


def _binary_of_tensors(kind: str, a: Value, b: Value, groups: Groups, so: tuple[int, ...]) -> Value:
    if a.d is b.d and a.groups == b.groups and kind == "mul":
        return Value(expr.unary("square", a.d), groups, so)
    if kind == "mul":
        fused = expr.fuse_silu(a, b) or expr.fuse_gelu(a, b) or expr.fuse_gelu_erf(a, b)
        if fused is not None:
            return Value(fused.d, groups, so)
    return Value(expr.binary(kind, a.d, b.d), groups, so)


def _convert_reduction(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    kind = "sum" if node.name == "reduce_sum" else "max"
    axes = sorted(node.params["axes"])
    v = b.laid_out(x, node.name, reduced=axes)
    d = v.d
    total, count = 1, 0
    for j, g in enumerate(v.groups):
        r = _layout.real(g, v.shape)
        hit = [a for a in r if a in axes]
        if not hit:
            continue
        if len(hit) != len(r):
            raise b.conflict(
                node,
                0,
                f"reduces {hit} of a kernel axis that also holds {[a for a in r if a not in axes]}",
            )
        total *= d.shape[j]
        count += 1
        d = expr.reduce(d, j, kind)
    held = _layout.held(v.groups)
    broadcast = prod(v.shape[a] for a in axes if a not in held or v.shape[a] == 1)
    if kind == "sum" and broadcast > 1:  # summing equal values along a broadcast dim
        d = expr.unary("mul_scalar", d, float(broadcast))
    kept = [a for a in range(len(v.shape)) if a not in axes]
    groups = _layout.relabel(v.groups, {a: i for i, a in enumerate(kept)})
    if kind == "sum" and count == 1 and broadcast == 1 and total > 1 and d.op == "reduce":
        b.sum_of[id(d)] = (d.args[0], d.attr[0], float(total))  # for mean recognition
    if count == 0 and kind == "max":  # a max over broadcast dims only: the value itself
        return Value(v.d, groups, out.shape)
    return Value(d, groups, out.shape)


_FOLLOW = {
    "add",
    "sub",
    "mul",
    "div",
    "max",
    "exp",
    "neg",
    "logistic",
    "tanh",
    "erf",
    "erfc",
    "square",
    "sqrt",
    "rsqrt",
    "integer_pow",
    "convert_element_type",
    "stop_gradient",
    "copy",
}


def _reduced_later(b: Builder, out: Var) -> set[int]:
    """The dims of `out` that a reduction in the region later reduces (a softmax over the
    scores' keys), following them through elementwise ops and transposes: the matmul lays
    those out on its result's last axis, where the reduction and the next matmul want them."""
    found: set[int] = set()
    todo = [(out, d, d) for d in range(len(out.shape))]  # (value, its dim, out's dim)
    seen: set[tuple[int, int]] = set()
    while todo:
        v, d, origin = todo.pop()
        if (id(v), d) in seen or len(seen) > 10_000:
            continue
        seen.add((id(v), d))
        for n in b.consumers.get(v, []):
            o = n.outvars[0]
            if n.name in ("reduce_sum", "reduce_max"):
                if d in n.params["axes"]:
                    found.add(origin)
            elif n.name in _FOLLOW and len(o.shape) == len(v.shape):
                todo.append((o, d, origin))
            elif n.name == "transpose":
                todo.append((o, list(n.params["permutation"]).index(d), origin))
            elif n.name == "broadcast_in_dim":
                todo.append((o, n.params["broadcast_dimensions"][d], origin))
    return found


def _matmul(
    b: Builder, node: Node, x: Operand, y: Operand, lhs: dot.Side, rhs: dot.Side, last: set[int]
) -> tuple[Value, dot.Arrangement]:
    """The kernel matmul of a dot_general's operands `x`, `y` (sides `lhs`, `rhs`)."""
    operands = (x, y)
    computed = [i for i, o in enumerate(operands) if isinstance(o, Value)]
    arr = dot.arrange(lhs, rhs, last)
    if arr is None:
        if computed:
            i = min(computed, key=lambda i: prod(operands[i].d.shape))  # type: ignore[union-attr]
            raise b.conflict(node, i, "its computed operand's kernel layout fits no matmul")
        raise b.unsupported(node, f"no matmul layout for {node.params['dimension_numbers']}")
    if arr.copies and len(computed) == 1:
        # Laying out the lazy operand copies it at every call; when it is much larger than
        # the computed operand and the result (a [vocab, d] embedding used transposed), the
        # copy costs more than cutting the region before this matmul, which lets the small
        # operand be the one laid out.
        i = computed[0]
        small = prod(operands[i].d.shape) + prod(node.outvars[0].shape)  # type: ignore[union-attr]
        if arr.copies > 2 * small:
            raise b.conflict(node, i, f"would copy {arr.copies} elements of its other operand")
    a_op, b_op = operands if arr.a_is_lhs else operands[::-1]
    a_val = a_op if isinstance(a_op, Value) else b.place(a_op, arr.a_groups)  # type: ignore[arg-type]
    b_val = b_op if isinstance(b_op, Value) else b.place(b_op, arr.b_groups)  # type: ignore[arg-type]
    lead = expr.broadcast_shapes(a_val.d.shape[:-2], b_val.d.shape[:-2])
    shape = lead + (a_val.d.shape[-2], b_val.d.shape[-1])
    d = Expr("matmul", [a_val.d, b_val.d], None, shape)
    return Value(d, arr.out_groups, ()), arr


def _vector_product(
    b: Builder,
    node: Node,
    out: Var,
    x: Operand,
    y: Operand,
    lhs: dot.Side,
    rhs: dot.Side,
    last: set[int],
) -> Value | None:
    """The dot as a broadcast product and a sum (dot.vector_product) where a matmul would copy
    the larger operand at the boundary and this copies only the vector; else None. The
    matmul compared is the one _matmul would build, with `last` (the dims a later reduction
    reduces) on the result's last axis: decode scores over a [B, K, S, H] cache need no copy
    with the keys on the rows, but a softmax wants them last, and that matmul copies K (the
    paper's gqa_decode: 33.5M elements a call, which lost the region its 1.48x)."""
    vp = dot.vector_product(lhs, rhs)
    if vp is None or not isinstance(x, Lazy) or not isinstance(y, Lazy):
        return None
    big, vec = (x, y) if vp.big_is_lhs else (y, x)
    arr = dot.arrange(lhs, rhs, last)
    if arr is not None and arr.copies <= 2 * (prod(vec.shape) + prod(out.shape)):
        return None
    big_val = b.place(big, vp.big_groups)
    vec_val = b.place(vec, vp.vec_groups)
    d = expr.binary("mul", vec_val.d, big_val.d)
    for axis in vp.summed:
        d = expr.reduce(d, axis, "sum")
    return Value(d, vp.out_groups, out.shape)


def _convert_dot_general(b: Builder, node: Node, out: Var, x: Operand, y: Operand) -> Operand:
    if isinstance(x, float) or isinstance(y, float):
        raise b.unsupported(node, "a scalar constant operand")
    lhs, rhs = dot.sides(
        node,
        x.groups if isinstance(x, Value) else None,
        y.groups if isinstance(y, Value) else None,
        (x.perm if isinstance(x, Lazy) else None, y.perm if isinstance(y, Lazy) else None),
    )
    last = _reduced_later(b, out)
    summed = _vector_product(b, node, out, x, y, lhs, rhs, last)
    if summed is not None:
        return summed
    v, _ = _matmul(b, node, x, y, lhs, rhs, last)
    return Value(v.d, v.groups, out.shape)


def _convert_conv(b: Builder, node: Node, out: Var, x: Operand, w: Operand) -> Operand:
    """A patch embedding (window = stride, no padding): a matmul of the image's patches,
    which XLA cuts out at the boundary, with the filters."""
    if isinstance(x, float) or isinstance(w, float):
        raise b.unsupported(node, "a scalar constant operand")
    if isinstance(x, Value):
        raise b.conflict(
            node,
            0,
            "its image is computed in the region (patches are cut out by XLA, from an input)",
        )
    patches, as_dot, to_out = dot.patch_matmul(node)
    w_groups = w.groups if isinstance(w, Value) else None
    lhs, rhs = dot.sides(as_dot, None, w_groups)
    v, _ = _matmul(b, node, x.then(patches), w, lhs, rhs, set())
    return Value(v.d, _layout.relabel(v.groups, to_out), out.shape)


# -- factors -----------------------------------------------------------------------------


def _operands(node: Node) -> list[Var]:
    return [v for v in node.invars if isinstance(v, Var)]


def _factors_same_shape(node: Node, uf: Links, reduced: list[tuple[Var, int]]) -> str:
    out = node.outvars[0]
    for v in _operands(node):  # equal ranks; a size-1 operand dim is broadcast
        if len(v.shape) not in (0, len(out.shape)):
            return f"{node.name}: operand rank {len(v.shape)} differs from the result's"
        for d in range(len(v.shape)):
            if v.shape[d] == out.shape[d]:
                uf.union((v, d), (out, d))
            elif v.shape[d] != 1:
                return f"{node.name}: operand shape {v.shape} does not broadcast to {out.shape}"
    return ""


def _factors_broadcast_in_dim(node: Node, uf: Links, reduced: list[tuple[Var, int]]) -> str:
    operands = _operands(node)
    if not operands:
        return ""
    (x,) = operands
    out = node.outvars[0]
    for i, j in enumerate(node.params["broadcast_dimensions"]):
        if x.shape[i] == out.shape[j]:
            uf.union((x, i), (out, j))
    return ""


def _factors_reshape(node: Node, uf: Links, reduced: list[tuple[Var, int]]) -> str:
    remap, why = _size1_reshape(node)
    if remap is None:
        return why
    x, out = node.invars[0], node.outvars[0]
    for i, j in remap.items():
        uf.union((x, i), (out, j))
    return ""


def _factors_transpose(node: Node, uf: Links, reduced: list[tuple[Var, int]]) -> str:
    (x,) = _operands(node)
    out = node.outvars[0]
    for j, i in enumerate(node.params["permutation"]):
        uf.union((x, i), (out, j))
    return ""


def _factors_reduction(node: Node, uf: Links, reduced: list[tuple[Var, int]]) -> str:
    (x,) = _operands(node)
    out = node.outvars[0]
    axes = set(node.params["axes"])
    kept = [i for i in range(len(x.shape)) if i not in axes]
    for j, i in enumerate(kept):
        uf.union((x, i), (out, j))
    reduced.extend((x, i) for i in axes)
    return ""


def _factors_dot_general(node: Node, uf: Links, reduced: list[tuple[Var, int]]) -> str:
    lhs, rhs = node.invars
    out = node.outvars[0]
    if not (isinstance(lhs, Var) and isinstance(rhs, Var)):
        return "dot_general: a constant operand"
    (lc, rc), (lb, rb) = node.params["dimension_numbers"]
    j = 0
    for a, b in zip(lb, rb):
        uf.union((lhs, a), (out, j))
        uf.union((rhs, b), (out, j))
        j += 1
    for a, b in zip(lc, rc):
        uf.union((lhs, a), (rhs, b))
        reduced.append((lhs, a))
    for side, skip in ((lhs, set(lc) | set(lb)), (rhs, set(rc) | set(rb))):
        for a in range(len(side.shape)):
            if a not in skip:
                uf.union((side, a), (out, j))
                j += 1
    return ""


def _factors_conv(node: Node, uf: Links, reduced: list[tuple[Var, int]]) -> str:
    return "conv_general_dilated: its patch dims are not followed across devices"


def link_factors(node: Node, uf: Links, reduced: list[tuple[Var, int]]) -> str:
    """Unites the dims of `node`'s operands and results that must be split alike; "" or why
    its dims cannot be followed."""
    found = RULES.get(node.name)
    if found is None:
        return f"{node.name}: no rule for how its dims split"
    return found.factors(node, uf, reduced)


# -- flops -------------------------------------------------------------------------------


def _flops_elementwise(node: Node) -> int:
    return _size(node.outvars[0].shape)


def _flops_free(node: Node) -> int:
    return 0  # layout changes and dtype bookkeeping


def _flops_reduction(node: Node) -> int:
    return _size(node.invars[0].shape)


def _flops_dot_general(node: Node) -> int:
    (lc, _), _ = node.params["dimension_numbers"]
    k = _size(tuple(node.invars[0].shape[a] for a in lc)) if lc else 1
    return 2 * _size(node.outvars[0].shape) * k


def _flops_conv(node: Node) -> int:
    return dot.conv_flops(node)


def flops(node: Node) -> int:
    """Floating-point operations of `node` as written: 2·M·N·K per matmul, one per element
    for elementwise ops and reductions, none for layout changes."""
    found = RULES.get(node.name)
    return found.flops(node) if found is not None else _flops_elementwise(node)


# -- the table ---------------------------------------------------------------------------


def _register(
    names: tuple[str, ...],
    *,
    convert: Convert,
    factors: Factors,
    admit: Admit = _admit,
    flops: Flops = _flops_elementwise,
    anchor: bool = False,
) -> None:
    for name in names:
        RULES[name] = Rule(name, admit, convert, factors, flops, anchor)


_register(
    ("exp", "sqrt", "rsqrt", "logistic", "neg", "square", "erf", "erfc"),
    convert=_convert_unary,
    factors=_factors_same_shape,
)
_register(("tanh",), convert=_convert_tanh, factors=_factors_same_shape)
_register(("add", "sub", "mul", "div"), convert=_convert_binary, factors=_factors_same_shape)
_register(
    ("integer_pow",),
    admit=_admit_integer_pow,
    convert=_convert_integer_pow,
    factors=_factors_same_shape,
)
_register(("max",), admit=_admit_max, convert=_convert_max, factors=_factors_same_shape)
_register(
    ("select_n",),
    admit=_admit_select_n,
    convert=_convert_select_n,
    factors=_factors_same_shape,
    flops=_flops_free,
)
_register(
    ("reduce_sum", "reduce_max"),
    convert=_convert_reduction,
    factors=_factors_reduction,
    flops=_flops_reduction,
    anchor=True,
)
_register(
    ("dot_general",),
    convert=_convert_dot_general,
    factors=_factors_dot_general,
    flops=_flops_dot_general,
    anchor=True,
)
_register(
    ("stop_gradient", "copy", "copy_p"),
    convert=_convert_identity,
    factors=_factors_same_shape,
    flops=_flops_free,
)
_register(
    ("convert_element_type",),
    admit=_admit_convert,
    convert=_convert_element_type,
    factors=_factors_same_shape,
    flops=_flops_free,
)
_register(
    ("broadcast_in_dim",),
    convert=_convert_broadcast_in_dim,
    factors=_factors_broadcast_in_dim,
    flops=_flops_free,
)
_register(
    ("reshape", "squeeze"),
    admit=_admit_reshape,
    convert=_convert_reshape,
    factors=_factors_reshape,
    flops=_flops_free,
)
_register(
    ("transpose",),
    convert=_convert_transpose,
    factors=_factors_transpose,
    flops=_flops_free,
)
_register(
    ("conv_general_dilated",),
    admit=_admit_conv,
    convert=_convert_conv,
    factors=_factors_conv,
    flops=_flops_conv,
    anchor=True,
)

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

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

import jax.numpy as jnp
import numpy as np

from mirage_jax.frontend import expr
from mirage_jax.frontend.expr import Expr, Operand, RegionNotSupported, Value
from mirage_jax.frontend.flat import Lit, Node, Var

MAX_RANK = 4  # of every kernel-graph tensor
KERNEL_DTYPES = ("float32", "bfloat16", "float16")  # of every kernel-graph tensor
INTEGER_POWERS = (-2, -1, 1, 2, 3, 4)


class Builder(Protocol):
    """What a convert rule may use of the region converter (to_graph._Builder)."""

    region: Any  # partition.Region
    env: dict[Var, Operand]
    sum_of: dict[int, tuple[Expr, int, float]]

    def input(self, index: int, perm: tuple[int, ...] | None = None) -> Expr: ...

    def full(self, x: Operand, what: str) -> Value: ...


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


def dot_general_form(node: Node) -> str | None:
    """ "nn" (rhs [..., k, n]), "nt" (rhs [..., n, k]) or None when not a supported matmul."""
    (lc, rc), (lb, rb) = node.params["dimension_numbers"]
    lhs, rhs = node.invars
    nb = len(lb)
    if tuple(lb) != tuple(range(nb)) or tuple(rb) != tuple(range(nb)):
        return None
    if len(lhs.shape) != nb + 2 or len(rhs.shape) != nb + 2:
        return None
    if tuple(lc) != (nb + 1,):
        return None
    if tuple(rc) == (nb,):
        return "nn"
    if tuple(rc) == (nb + 1,):
        return "nt"
    return None


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
        if getattr(v.dtype, "name", None) not in KERNEL_DTYPES:
            return f"{name}: operand {v} of dtype {v.dtype} (kernels take {KERNEL_DTYPES})"
        if len(v.shape) > MAX_RANK:
            return f"{name}: operand {v} of rank > {MAX_RANK}"
        if 0 in v.shape:
            return f"{name}: operand {v} has no elements"
    found = RULES.get(name)
    if found is None:
        return f"{name}: not a kernel-graph primitive"
    return found.admit(node, producers)


def _admit(node: Node, producers: dict[Var, Node]) -> str | None:
    return None


def _admit_reshape(node: Node, producers: dict[Var, Node]) -> str | None:
    # A reshape that regroups dims stays outside the regions (plain JAX), so it splits them
    # rather than making the region around it inexpressible.
    return _size1_reshape(node)[1] or None


def _admit_convert(node: Node, producers: dict[Var, Node]) -> str | None:
    if not is_float(node.outvars[0].dtype):
        return "convert_element_type: to a non-float dtype"
    return None


def _admit_transpose(node: Node, producers: dict[Var, Node]) -> str | None:
    # Only folded into an input layout: the operand must come from outside any region.
    src = node.invars[0]
    prod = producers.get(src) if isinstance(src, Var) else None
    if prod is None or admit_reason(prod, producers) is not None:
        return None
    return "transpose: of an intermediate value (only region inputs can be transposed)"


def _admit_dot_general(node: Node, producers: dict[Var, Node]) -> str | None:
    if dot_general_form(node) is None:
        return f"dot_general: unsupported dimension_numbers {node.params['dimension_numbers']}"
    return None


def _admit_integer_pow(node: Node, producers: dict[Var, Node]) -> str | None:
    if node.params["y"] in INTEGER_POWERS:
        return None
    return f"integer_pow: y={node.params['y']}"


# Results that are >= +0 or NaN whatever their operands (not sqrt/rsqrt: sqrt(-0) is -0).
_NONNEG_ANYWAY = ("square", "exp", "abs", "logistic")
# Results that are >= +0 or NaN when every operand is (+0 + +0 is +0; 0 * inf and 0/0 NaN).
_NONNEG_KEPT = (
    "add", "mul", "div", "max", "reduce_sum", "broadcast_in_dim", "reshape",
    "squeeze", "expand_dims", "transpose", "convert_element_type", "copy", "stop_gradient",
)  # fmt: skip


def _nonneg_or_nan(v: Var | Lit, producers: dict[Var, Node], depth: int = 0) -> bool:
    """Whether every element of `v` is provably >= +0 or NaN, so that max(0, v) is v itself
    (XLA's max propagates NaN): the variance of jnp.var, which Equinox's LayerNorm clamps
    with jnp.maximum(0, var). Not flax's E[x^2] - E[x]^2, whose clamp is real."""
    if isinstance(v, Lit):
        x = np.asarray(v.value, np.float64)
        return bool(np.all(np.isnan(x) | ((x >= 0) & ~np.signbit(x))))
    node = producers.get(v)
    if node is None or depth > 64:
        return False
    if node.name in _NONNEG_ANYWAY:
        return True
    if node.name == "integer_pow":
        return int(node.params["y"]) % 2 == 0
    operands = node.invars[1:] if node.name == "select_n" else node.invars
    if node.name not in _NONNEG_KEPT and node.name != "select_n":
        return False
    return all(_nonneg_or_nan(u, producers, depth + 1) for u in operands)


def _max_identity(node: Node, producers: dict[Var, Node]) -> int | None:
    """The operand max(0, x) or max(x, 0) is equal to, x being >= +0 or NaN; else None."""
    for zero, other in ((0, 1), (1, 0)):
        lit = node.invars[zero]
        if (
            isinstance(lit, Lit)
            and lit.value.size == 1
            and float(lit.value.reshape(())) == 0
            and _nonneg_or_nan(node.invars[other], producers)
        ):
            return other
    return None


def _admit_max(node: Node, producers: dict[Var, Node]) -> str | None:
    if any(is_neg_inf(v) for v in node.invars):
        return None  # the softmax stabilizer max(-inf, reduce_max(x))
    if _max_identity(node, producers) is not None:
        return None
    return "max: only max(-inf, x) of a softmax stabilizer, or max(0, x) of x >= 0, is supported"


def _admit_select_n(node: Node, producers: dict[Var, Node]) -> str | None:
    if isinstance(node.invars[0], Lit):
        return None  # jnp.var's where(n - ddof > 0, ...), its predicate folded (flat._fold)
    return "select_n: on a computed predicate"


# -- convert -----------------------------------------------------------------------------


def _convert_identity(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    return x


def _convert_broadcast_in_dim(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    if not isinstance(x, Value):
        return x
    bd = node.params["broadcast_dimensions"]
    axes = tuple(None if a is None else bd[a] for a in x.axes)
    return Value(x.d, axes, len(out.shape))


def _convert_reshape(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    if not isinstance(x, Value):
        return x
    remap, why = _size1_reshape(node)
    if remap is None:
        raise RegionNotSupported(why)
    axes = tuple(None if a is None or a not in remap else remap[a] for a in x.axes)
    return Value(x.d, axes, len(out.shape))


def _convert_transpose(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    perm = tuple(node.params["permutation"])
    src = node.invars[0]
    nontrivial = [p for p in perm if src.shape[p] != 1]
    if nontrivial == sorted(nontrivial):
        # Only size-1 dims move: a reshape.
        return _convert_reshape(b, node, out, x)
    if isinstance(src, Var) and src in b.region.inputs and src not in b.env:
        d = b.input(b.region.inputs.index(src), perm)
        return Value(d, tuple(range(len(perm))), len(perm))
    raise RegionNotSupported("transpose: of an intermediate value; only inputs fold")


# jaxpr primitive -> (kernel-graph unary op, its value on a constant, for folding)
_UNARY: dict[str, tuple[str, Callable[[np.float64], Any]]] = {
    "exp": ("exp", np.exp),
    "sqrt": ("sqrt", np.sqrt),
    "rsqrt": ("rsqrt", lambda c: 1.0 / np.sqrt(c)),
    "logistic": ("sigmoid", lambda c: 1.0 / (1.0 + np.exp(-c))),
    "neg": ("neg", np.negative),
    "square": ("square", np.square),
}


def _convert_unary(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    kind, folded = _UNARY[node.name]
    if not isinstance(x, Value):  # constant folding
        return fold(folded, out, x)
    return Value(expr.unary(kind, x.d), x.axes, x.rank)


def _convert_tanh(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    """tanh(z) = 2·sigmoid(2z) - 1: emitted so (a kernel graph has no tanh); kept as one
    "tanh" node until then, so that gelu's tanh form can be recognized."""
    if not isinstance(x, Value):
        return fold(np.tanh, out, x)
    return Value(expr.unary("tanh", x.d), x.axes, x.rank)


def _convert_integer_pow(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    y = node.params["y"]
    if not isinstance(x, Value):
        return fold(lambda c: c**y, out, x)
    d = x.d
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
        raise RegionNotSupported(f"integer_pow: y={y}")
    return Value(table[y], x.axes, x.rank)


def _convert_select_n(b: Builder, node: Node, out: Var, which: Operand, *cases: Operand) -> Operand:
    predicate = node.invars[0]
    if not isinstance(predicate, Lit):
        raise RegionNotSupported("select_n: on a computed predicate")
    return cases[int(predicate.value.reshape(()))]


def _convert_max(b: Builder, node: Node, out: Var, a: Operand, c: Operand) -> Operand:
    a_inf, c_inf = is_neg_inf(node.invars[0]), is_neg_inf(node.invars[1])
    if a_inf and isinstance(c, Value):
        return c
    if c_inf and isinstance(a, Value):
        return a
    # The operand's producer must be in this region for its sign to be known here.
    same = _max_identity(node, {v: n for n in b.region.nodes for v in n.outvars})
    if same is not None and isinstance((a, c)[same], Value):
        return (a, c)[same]
    raise RegionNotSupported("max: only max(-inf, x) of a softmax stabilizer, or max(0, x >= 0)")


def _convert_binary(b: Builder, node: Node, out: Var, x: Operand, y: Operand) -> Operand:
    kind = node.name
    n = len(out.shape)
    if isinstance(x, Value):
        if isinstance(y, Value):
            return _binary_of_tensors(kind, node, n, x, y)
        return _tensor_op_constant(b, kind, n, x, y)
    if isinstance(y, Value):
        return _constant_op_tensor(kind, n, x, y)
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
    return fold(ops[kind], out, x, y)


def _tensor_op_constant(b: Builder, kind: str, n: int, x: Value, c: float) -> Value:
    if kind == "div":
        s = b.sum_of.get(id(x.d))
        if s is not None and np.isclose(c, s[2], rtol=1e-6):
            return Value(expr.reduce(s[0], s[1], "mean"), x.axes, n)
        with np.errstate(all="ignore"):  # x/0 is x·inf, as in IEEE
            inverse = np.float32(1.0) / np.float32(c)
        if not np.isfinite(inverse):
            raise RegionNotSupported(f"div: by {c} (kernels hold finite float32 constants only)")
        if np.isfinite(c) and c != 0 and not abs(inverse) >= np.finfo(np.float32).tiny:
            # x·(1/c) would not round like x/c: 1/c is subnormal in float32 (or 0).
            raise RegionNotSupported(f"div: by {c}, whose reciprocal float32 cannot hold")
        return Value(expr.unary("mul_scalar", x.d, float(inverse)), x.axes, n)
    d = {
        "add": lambda: expr.unary("add_scalar", x.d, c),
        "sub": lambda: expr.unary("add_scalar", x.d, -c),
        "mul": lambda: expr.unary("mul_scalar", x.d, c),
    }[kind]()
    return Value(d, x.axes, n)


def _constant_op_tensor(kind: str, n: int, c: float, y: Value) -> Value:
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
    return Value(d, y.axes, n)


def _binary_of_tensors(kind: str, node: Node, n: int, a: Value, b: Value) -> Value:
    if a.d is b.d and a.axes == b.axes and kind == "mul":
        return Value(expr.unary("square", a.d), a.axes, n)
    axes: tuple[int | None, ...] | None
    if a.axes == b.axes and a.d.shape == b.d.shape:
        axes = a.axes
    elif expr.aligned(a, n) and expr.aligned(b, n):
        axes = None
    else:
        raise RegionNotSupported(
            f"{kind}: operands {node.invars} fold to layouts that do not broadcast"
        )
    if kind == "mul":
        fused = expr.fuse_silu(a, b) or expr.fuse_gelu(a, b)
        if fused is not None:
            return fused
    d = expr.binary(kind, a.d, b.d)
    if axes is None:
        axes = expr.result_axes(d.shape, n)
    return Value(d, axes, n)


def _convert_reduction(b: Builder, node: Node, out: Var, x: Operand) -> Operand:
    kind = "sum" if node.name == "reduce_sum" else "max"
    v = b.full(x, node.name)
    axes = list(v.axes)
    d = v.d
    total = 1
    for a in sorted(node.params["axes"]):
        if a not in axes:
            if node.invars[0].shape[a] == 1:
                continue
            raise RegionNotSupported(f"{node.name}: over a broadcast dim {a}")
        k = axes.index(a)
        total *= d.shape[k]
        d = expr.reduce(d, k, kind)
        axes[k] = None
    removed = sorted(node.params["axes"])
    new_axes = tuple(None if a is None else a - sum(r < a for r in removed) for a in axes)
    # Record a single-dim sum for mean recognition.
    single = len([a for a in removed if node.invars[0].shape[a] != 1]) == 1
    if kind == "sum" and len(removed) >= 1 and d.op == "reduce" and total > 1 and single:
        b.sum_of[id(d)] = (d.args[0], d.attr[0], float(total))
    return Value(d, new_axes, len(out.shape))


def _convert_dot_general(b: Builder, node: Node, out: Var, x: Operand, y: Operand) -> Operand:
    form = dot_general_form(node)
    if form is None:
        raise RegionNotSupported(
            f"dot_general: dimension_numbers {node.params['dimension_numbers']}"
        )
    lhs, rhs = b.full(x, "dot_general"), b.full(y, "dot_general")
    for name, v, var in (("lhs", lhs, node.invars[0]), ("rhs", rhs, node.invars[1])):
        # each axis in place (a size-1 axis may hold no logical axis), nothing broadcast
        in_place = len(v.axes) == len(var.shape) and all(
            ax == j or (ax is None and var.shape[j] == 1) for j, ax in enumerate(v.axes)
        )
        if not in_place or v.d.shape != var.shape:
            if name == "rhs" and form == "nt":
                continue
            raise RegionNotSupported(f"dot_general: {name} {var} is a broadcast or reshaped value")
    if form == "nt":
        rv = node.invars[1]
        if not (
            isinstance(rv, Var) and rhs.d.op == "input" and rhs.axes == tuple(range(len(rv.shape)))
        ):
            raise RegionNotSupported(
                "dot_general: rhs contracts its last dim and is not a region input"
            )
        r = len(rv.shape)
        swap = tuple(range(r - 2)) + (r - 1, r - 2)
        # The rhs is an input, maybe already transposed (a folded transpose): its
        # layout composed with the swap of its last two dims.
        base = rhs.d.attr[1] or tuple(range(r))
        bd = b.input(rhs.d.attr[0], tuple(base[i] for i in swap))
    else:
        bd = rhs.d
    shape = lhs.d.shape[:-1] + bd.shape[-1:]
    d = Expr("matmul", [lhs.d, bd], None, shape)
    return Value(d, tuple(range(len(out.shape))), len(out.shape))


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
    ("exp", "sqrt", "rsqrt", "logistic", "neg", "square"),
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
    admit=_admit_dot_general,
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
    convert=_convert_identity,
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
    admit=_admit_transpose,
    convert=_convert_transpose,
    factors=_factors_transpose,
    flops=_flops_free,
)

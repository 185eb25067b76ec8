"""Converting a partition Region into a mirage_jax KernelGraph (DESIGN.md §5.2).

Each jaxpr value is tracked as a kernel-graph tensor plus `axes`: for every axis of the
kernel tensor, the logical (jaxpr) axis it holds, or None for a size-1 axis that holds none.
Logical axes missing from `axes` are broadcast. This folds broadcast_in_dim, size-1 reshapes,
the dims that reductions keep, and convert_element_type (dtype bookkeeping) away. Transposes
of region inputs are folded into the input layout (`GraphInput.perm`).

The graph is built as a small expression DAG first, normalized (mean, silu, square), and
then only what the outputs reach is emitted into the KernelGraph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mirage_jax.frontend.flat import Lit, Var
from mirage_jax.frontend.partition import Region, dot_general_form, is_neg_inf
from mirage_jax.ir.graph import KernelGraph

_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class RegionNotSupported(Exception):
    """The region cannot be expressed as a kernel graph; `reason` names the primitive."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class GraphInput:
    """Kernel-graph input i is `transpose(region.inputs[index], perm)` cast to `dtype`;
    its shape is `shape` (rank-0 inputs become shape (1,))."""

    index: int
    perm: tuple | None
    shape: tuple
    dtype: str


@dataclass(frozen=True)
class GraphOutput:
    """Region output i is kernel output i reshaped to `reshape`, broadcast to `shape`, cast."""

    reshape: tuple
    shape: tuple
    dtype: object  # numpy dtype


@dataclass
class RegionGraph:
    graph: KernelGraph
    inputs: list  # GraphInput, in the graph's input order
    outputs: list  # GraphOutput, in region.outputs order

    def prepare_inputs(self, region_inputs, xp=np):
        """Region input values -> the graph's input values (layouts applied)."""
        out = []
        for gi in self.inputs:
            x = xp.asarray(region_inputs[gi.index])
            if gi.perm is not None:
                x = xp.transpose(x, gi.perm)
            out.append(xp.reshape(x, gi.shape))
        return out

    def finish_outputs(self, graph_outputs, xp=np):
        """The graph's output values -> region output values."""
        return [
            xp.broadcast_to(xp.reshape(xp.asarray(y), o.reshape), o.shape).astype(o.dtype)
            for y, o in zip(graph_outputs, self.outputs)
        ]


# -- expression DAG --------------------------------------------------------------------


class _D:
    __slots__ = ("op", "args", "attr", "shape")

    def __init__(self, op, args, attr, shape):
        self.op, self.args, self.attr, self.shape = op, tuple(args), attr, tuple(shape)


def _bcast(a, b):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise RegionNotSupported(f"internal: shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _unary(kind, d, scalar=0.0):
    return _D("unary", [d], (kind, float(scalar)), d.shape)


def _binary(kind, a, b):
    return _D("binary", [a, b], kind, _bcast(a.shape, b.shape))


def _reduce(d, dim, kind):
    shape = list(d.shape)
    shape[dim] = 1
    return _D("reduce", [d], (dim, kind), shape)


@dataclass
class _Val:
    d: _D
    axes: tuple  # per kernel axis: logical axis or None
    rank: int  # logical rank


def _aligned(v: _Val, n: int) -> bool:
    """The kernel tensor, right-aligned against logical rank n, matches positionally."""
    k = len(v.axes)
    for j, a in enumerate(v.axes):
        pos = n - k + j
        if a is None:
            continue
        if a != pos:
            return False
    return True


def _result_axes(shape, n):
    k = len(shape)
    return tuple(None if shape[j] == 1 else n - k + j for j in range(k))


def _scalar_op(d, kind):
    """(operand, scalar) when d is the unary `kind` (mul_scalar, add_scalar), else None."""
    if d.op == "unary" and d.attr[0] == kind:
        return d.args[0], d.attr[1]
    return None


def _is_cube(d, x) -> bool:
    """d is x·x·x as integer_pow(x, 3) builds it: mul(square(x), x), in either order."""
    if d.op != "binary" or d.attr != "mul":
        return False
    for sq, lin in (d.args, d.args[::-1]):
        if lin is x and sq.op == "unary" and sq.attr[0] == "square" and sq.args[0] is x:
            return True
    return False


class _Builder:
    def __init__(self, region: Region):
        self.region = region
        self.env: dict = {}
        self.inputs: dict = {}  # (index, perm) -> _D
        self.sum_of: dict = {}  # id(_D) of a reduce sum -> (source _D, dim, count)

    # values
    def input(self, index, perm=None):
        key = (index, perm)
        if key not in self.inputs:
            v = self.region.inputs[index]
            if v.dtype.name not in _DTYPES:
                raise RegionNotSupported(f"input {v}: dtype {v.dtype.name} is not supported")
            shape = v.shape if perm is None else tuple(v.shape[p] for p in perm)
            if len(shape) > 4 or 0 in shape:
                raise RegionNotSupported(f"input {v}: shape {shape} is not supported")
            self.inputs[key] = _D("input", [], key, shape or (1,))
        return self.inputs[key]

    def get(self, v):
        if isinstance(v, Lit):
            if v.value.size != 1:
                raise RegionNotSupported(f"non-scalar literal of shape {v.shape}")
            return float(v.value.reshape(()))
        if v in self.env:
            return self.env[v]
        index = self.region.inputs.index(v)
        d = self.input(index)
        axes = tuple(range(len(v.shape))) if v.shape else (None,)
        return _Val(d, axes, len(v.shape))

    def full(self, x, what) -> _Val:
        if not isinstance(x, _Val):
            raise RegionNotSupported(f"{what}: a scalar constant where a tensor is needed")
        return x

    # conversion
    def run(self):
        for node in self.region.nodes:
            handler = getattr(self, "p_" + node.name, None)
            if handler is None:
                raise RegionNotSupported(f"{node.name}: not a kernel-graph primitive")
            args = [self.get(v) for v in node.invars]
            out = node.outvars[0]
            self.env[out] = handler(node, out, *args)

    def p_convert_element_type(self, node, out, x):
        return x

    p_stop_gradient = p_copy = p_copy_p = p_convert_element_type

    def p_broadcast_in_dim(self, node, out, x):
        if not isinstance(x, _Val):
            return x
        bd = node.params["broadcast_dimensions"]
        axes = tuple(None if a is None else bd[a] for a in x.axes)
        return _Val(x.d, axes, len(out.shape))

    def p_reshape(self, node, out, x):
        if not isinstance(x, _Val):
            return x
        src = node.invars[0].shape
        old = [i for i, s in enumerate(src) if s != 1]
        new = [i for i, s in enumerate(out.shape) if s != 1]
        if [src[i] for i in old] != [out.shape[i] for i in new]:
            raise RegionNotSupported(
                f"reshape: {src} -> {out.shape} changes more than size-1 dims"
            )
        if node.params.get("dimensions") not in (None, ()):
            raise RegionNotSupported("reshape: with a dimensions permutation")
        remap = dict(zip(old, new))
        axes = tuple(None if a is None or a not in remap else remap[a] for a in x.axes)
        return _Val(x.d, axes, len(out.shape))

    def p_squeeze(self, node, out, x):
        return self.p_reshape(node, out, x)

    def p_transpose(self, node, out, x):
        perm = tuple(node.params["permutation"])
        src = node.invars[0]
        nontrivial = [p for p in perm if src.shape[p] != 1]
        if nontrivial == sorted(nontrivial):
            # Only size-1 dims move: a reshape.
            return self.p_reshape(node, out, x)
        if isinstance(src, Var) and src in self.region.inputs and src not in self.env:
            d = self.input(self.region.inputs.index(src), perm)
            return _Val(d, tuple(range(len(perm))), len(perm))
        raise RegionNotSupported("transpose: of an intermediate value; only inputs fold")

    # elementwise
    _UNARY = {"exp": "exp", "sqrt": "sqrt", "rsqrt": "rsqrt", "logistic": "sigmoid",
              "neg": "neg", "square": "square"}

    def _un(self, node, out, x):
        kind = self._UNARY[node.name]
        if not isinstance(x, _Val):  # constant folding
            fold = {"exp": np.exp, "sqrt": np.sqrt, "rsqrt": lambda c: 1.0 / np.sqrt(c),
                    "sigmoid": lambda c: 1.0 / (1.0 + np.exp(-c)), "neg": np.negative,
                    "square": np.square}[kind]
            return float(fold(np.float64(x)))
        return _Val(_unary(kind, x.d), x.axes, x.rank)

    p_exp = p_sqrt = p_rsqrt = p_logistic = p_neg = p_square = _un

    def p_tanh(self, node, out, x):
        """tanh(z) = 2·sigmoid(2z) - 1: emitted so (a kernel graph has no tanh); kept as
        one "tanh" node until then, so that gelu's tanh form can be recognized."""
        if not isinstance(x, _Val):
            return float(np.tanh(np.float64(x)))
        return _Val(_unary("tanh", x.d), x.axes, x.rank)

    def p_integer_pow(self, node, out, x):
        y = node.params["y"]
        if not isinstance(x, _Val):
            return float(np.float64(x) ** y)
        d = x.d
        sq = _unary("square", d)
        table = {1: d, 2: sq, 3: _binary("mul", sq, d), 4: _unary("square", sq),
                 -1: _unary("recip", d), -2: _unary("recip", sq)}
        if y not in table:
            raise RegionNotSupported(f"integer_pow: y={y}")
        return _Val(table[y], x.axes, x.rank)

    def p_max(self, node, out, a, b):
        a_inf, b_inf = is_neg_inf(node.invars[0]), is_neg_inf(node.invars[1])
        if a_inf and isinstance(b, _Val):
            return b
        if b_inf and isinstance(a, _Val):
            return a
        raise RegionNotSupported("max: only max(-inf, x) of a softmax stabilizer")

    def _bin(self, node, out, a, b):
        kind = node.name
        n = len(out.shape)
        if isinstance(a, _Val) and isinstance(b, _Val):
            if a.d is b.d and a.axes == b.axes and kind == "mul":
                return _Val(_unary("square", a.d), a.axes, n)
            if a.axes == b.axes and a.d.shape == b.d.shape:
                axes = a.axes
            elif _aligned(a, n) and _aligned(b, n):
                axes = None
            else:
                raise RegionNotSupported(
                    f"{kind}: operands {node.invars} fold to layouts that do not broadcast"
                )
            if kind == "mul":
                fused = self._silu(a, b) or self._gelu(a, b)
                if fused is not None:
                    return fused
            if kind == "div":
                mean = self._mean(a, b)
                if mean is not None:
                    return mean
            d = _binary(kind, a.d, b.d)
            if axes is None:
                axes = _result_axes(d.shape, n)
            return _Val(d, axes, n)
        if isinstance(a, _Val):  # tensor op constant
            c = b
            if kind == "div":
                s = self.sum_of.get(id(a.d))
                if s is not None and np.isclose(c, s[2], rtol=1e-6):
                    return _Val(_reduce(s[0], s[1], "mean"), a.axes, n)
            d = {
                "add": lambda: _unary("add_scalar", a.d, c),
                "sub": lambda: _unary("add_scalar", a.d, -c),
                "mul": lambda: _unary("mul_scalar", a.d, c),
                "div": lambda: _unary("mul_scalar", a.d, 1.0 / c),
            }[kind]()
            return _Val(d, a.axes, n)
        if isinstance(b, _Val):  # constant op tensor
            c = a
            d = {
                "add": lambda: _unary("add_scalar", b.d, c),
                "sub": lambda: _unary("add_scalar", _unary("neg", b.d), c),
                "mul": lambda: _unary("mul_scalar", b.d, c),
                "div": lambda: (_unary("recip", b.d) if c == 1.0
                                else _unary("mul_scalar", _unary("recip", b.d), c)),
            }[kind]()
            return _Val(d, b.axes, n)
        return float({"add": a + b, "sub": a - b, "mul": a * b,
                      "div": a / b if b else np.inf}[kind])

    p_add = p_sub = p_mul = p_div = _bin

    def _silu(self, a, b):
        for x, s in ((a, b), (b, a)):
            if (s.d.op == "unary" and s.d.attr[0] == "sigmoid" and s.d.args[0] is x.d
                    and s.axes == x.axes):
                return _Val(_unary("silu", x.d), x.axes, x.rank)
        return None

    def _gelu(self, a, b):
        """x · 0.5·(1 + tanh(√(2/π)·(x + 0.044715·x³))), jax.nn.gelu(approximate=True)."""
        for x, c in ((a, b), (b, a)):
            if c.axes != x.axes:
                continue
            d = c.d
            half = _scalar_op(d, "mul_scalar")
            one = half and _scalar_op(half[0], "add_scalar")
            t = one and one[0]
            if not (half and np.isclose(half[1], 0.5) and one and np.isclose(one[1], 1.0)
                    and t.op == "unary" and t.attr[0] == "tanh"):
                continue
            scaled = _scalar_op(t.args[0], "mul_scalar")
            if not (scaled and np.isclose(scaled[1], np.sqrt(2 / np.pi), rtol=1e-6)):
                continue
            inner = scaled[0]
            if inner.op != "binary" or inner.attr != "add" or x.d not in inner.args:
                continue
            other = inner.args[1] if inner.args[0] is x.d else inner.args[0]
            cubed = _scalar_op(other, "mul_scalar")
            if not (cubed and np.isclose(cubed[1], 0.044715, rtol=1e-6)
                    and _is_cube(cubed[0], x.d)):
                continue
            return _Val(_unary("gelu", x.d), x.axes, x.rank)
        return None

    def _mean(self, a, b):
        return None  # mean divides by a constant; a tensor divisor is a plain div

    # reductions and matmul
    def _reduction(self, node, out, x, kind):
        x = self.full(x, node.name)
        axes = list(x.axes)
        d = x.d
        total = 1
        for a in sorted(node.params["axes"]):
            if a not in axes:
                if node.invars[0].shape[a] == 1:
                    continue
                raise RegionNotSupported(f"{node.name}: over a broadcast dim {a}")
            k = axes.index(a)
            total *= d.shape[k]
            d = _reduce(d, k, kind)
            axes[k] = None
        removed = sorted(node.params["axes"])
        new_axes = tuple(None if a is None else a - sum(r < a for r in removed) for a in axes)
        if kind == "sum" and len(removed) >= 1 and d.op == "reduce" and total > 1:
            # Record a single-dim sum for mean recognition.
            if len([a for a in removed if node.invars[0].shape[a] != 1]) == 1:
                self.sum_of[id(d)] = (d.args[0], d.attr[0], float(total))
        return _Val(d, new_axes, len(out.shape))

    def p_reduce_sum(self, node, out, x):
        return self._reduction(node, out, x, "sum")

    def p_reduce_max(self, node, out, x):
        return self._reduction(node, out, x, "max")

    def p_dot_general(self, node, out, a, b):
        form = dot_general_form(node)
        if form is None:
            raise RegionNotSupported(
                f"dot_general: dimension_numbers {node.params['dimension_numbers']}"
            )
        a, b = self.full(a, "dot_general"), self.full(b, "dot_general")
        for name, v, var in (("lhs", a, node.invars[0]), ("rhs", b, node.invars[1])):
            # each axis in place (a size-1 axis may hold no logical axis), nothing broadcast
            in_place = len(v.axes) == len(var.shape) and all(
                ax == j or (ax is None and var.shape[j] == 1) for j, ax in enumerate(v.axes))
            if not in_place or v.d.shape != var.shape:
                if name == "rhs" and form == "nt":
                    continue
                raise RegionNotSupported(
                    f"dot_general: {name} {var} is a broadcast or reshaped value"
                )
        if form == "nt":
            rv = node.invars[1]
            if not (isinstance(rv, Var) and b.d.op == "input"
                    and b.axes == tuple(range(len(rv.shape)))):
                raise RegionNotSupported(
                    "dot_general: rhs contracts its last dim and is not a region input"
                )
            r = len(rv.shape)
            swap = tuple(range(r - 2)) + (r - 1, r - 2)
            # The rhs is an input, maybe already transposed (a folded transpose): its
            # layout composed with the swap of its last two dims.
            base = b.d.attr[1] or tuple(range(r))
            bd = self.input(b.d.attr[0], tuple(base[i] for i in swap))
        else:
            bd = b.d
        shape = a.d.shape[:-1] + bd.shape[-1:]
        d = _D("matmul", [a.d, bd], None, shape)
        return _Val(d, tuple(range(len(out.shape))), len(out.shape))


def region_to_graph(region: Region) -> RegionGraph:
    """Builds the KernelGraph of `region`, or raises RegionNotSupported."""
    b = _Builder(region)
    b.run()
    outs = []
    for v in region.outputs:
        val = b.env[v]
        if not isinstance(val, _Val):
            raise RegionNotSupported(f"output {v} is a constant")
        present = [a for a in val.axes if a is not None]
        if present != sorted(present):
            raise RegionNotSupported(f"output {v}: axes out of order")
        reshape = tuple(v.shape[i] if i in present else 1 for i in range(len(v.shape)))
        if len(v.shape) > 4 or len(val.d.shape) > 4:
            raise RegionNotSupported(f"output {v}: rank > 4")
        outs.append((val, GraphOutput(reshape, v.shape, v.dtype)))

    kg = KernelGraph()
    memo: dict = {}
    keys = sorted(b.inputs, key=lambda k: (k[0], k[1] is not None, k[1] or ()))
    graph_inputs = []
    for key in keys:
        d = b.inputs[key]
        v = region.inputs[key[0]]
        memo[id(d)] = kg.new_input(d.shape, _DTYPES[v.dtype.name])
        graph_inputs.append(GraphInput(key[0], key[1], d.shape, _DTYPES[v.dtype.name]))

    def emit(d):
        t = memo.get(id(d))
        if t is not None:
            return t
        args = [emit(a) for a in d.args]
        if d.op == "unary":
            kind, c = d.attr
            if kind in ("mul_scalar", "add_scalar"):
                t = getattr(kg, kind)(args[0], c)
            elif kind == "tanh":
                t = kg.add_scalar(kg.mul_scalar(kg.sigmoid(kg.mul_scalar(args[0], 2.0)), 2.0),
                                  -1.0)
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
    except Exception as e:  # noqa: BLE001 - an IR rule the folding did not foresee
        raise RegionNotSupported(f"kernel graph rejected the region: {e}") from e
    return RegionGraph(kg, graph_inputs, [o for _, o in outs])

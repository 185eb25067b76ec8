"""The flattened program: a jaxpr with its nested calls inlined into one list of `Node`s
over our own `Var`s, and running such nodes with jax.

`flatten` inlines nested `jit`/`pjit`, `custom_jvp_call`, `custom_vjp_call` (and plain call
primitives). A custom_jvp/custom_vjp call is inlined for partitioning and also recorded whole
(`CustomCall`), so that where it does not feed a kernel it runs as the original call, with its
own derivative rule. Scalar arithmetic on literals (jnp.var's `n - ddof`, the `n > 0` it
guards with) is folded into literals as it goes (`_fold`), by jax itself, so that the values
computed from it are not mistaken for constants a region would have to output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np

source_info_util: ModuleType | None
try:  # jax's own summary of an equation's source line: a private module, so best effort
    from jax._src import source_info_util
except ImportError:  # reports then name no source lines
    source_info_util = None

_INLINE = {
    "jit": ("jaxpr",),
    "pjit": ("jaxpr",),
    "closed_call": ("call_jaxpr",),
    "core_call": ("call_jaxpr",),
    "custom_jvp_call": ("call_jaxpr", "fun_jaxpr"),
    "custom_vjp_call": ("call_jaxpr", "fun_jaxpr"),
    "custom_vjp_call_jaxpr": ("fun_jaxpr", "call_jaxpr"),
    "checkpoint": ("jaxpr",),
    "remat": ("jaxpr",),
}

# Calls with their own derivative rules: inlined for partitioning, evaluated whole
# (CustomCall.bind) wherever they do not feed a kernel.
CUSTOM_DERIVATIVES = {"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr"}

# Loops and conds stay one node each (a body runs many times, a branch maybe never: inlining
# would not be the same program); the parameter holding each one's body (a ClosedJaxpr) or
# branches (a tuple of them), each partitioned as a program of its own
# (mirage_jax/rewrite/control_flow.py). A while loop's condition is left alone: it has no
# matmul worth a kernel.
CONTROL_FLOW = {"scan": "jaxpr", "while": "body_jaxpr", "cond": "branches"}


def sub_programs(node: Node) -> tuple[jcore.ClosedJaxpr, ...]:
    """The bodies (a loop's one, a cond's branches) of a CONTROL_FLOW node."""
    held = node.params[CONTROL_FLOW[node.name]]
    return tuple(held) if isinstance(held, (tuple, list)) else (held,)


# A numpy dtype, or one of jax's extended dtypes, which numpy cannot represent (a typed PRNG
# key's key<fry>): such values only pass through the flattened program, no region takes them.
DType = Any


def _extended(dtype: Any) -> bool:
    return bool(jax.dtypes.issubdtype(dtype, jax.dtypes.extended))


def as_dtype(dtype: Any) -> DType:
    return dtype if _extended(dtype) else np.dtype(dtype)


class Var:
    """A value of the flattened program."""

    __slots__ = ("dtype", "id", "shape")

    def __init__(self, vid: int, shape: Sequence[int], dtype: Any):
        self.id = vid
        self.shape = tuple(int(d) for d in shape)
        self.dtype: DType = as_dtype(dtype)

    def __repr__(self) -> str:
        return f"v{self.id}:{self.dtype.name}{list(self.shape)}"


class Lit:
    """A literal constant operand (a jaxpr Literal, or a scalar closed-over constant)."""

    __slots__ = ("dtype", "shape", "value")

    def __init__(self, value: Any, dtype: Any = None):
        # The jaxpr's own dtype when given: a weakly typed literal (2.0, 0) is a Python
        # scalar, which numpy would widen to float64/int64.
        self.value = np.asarray(value, dtype)
        self.shape: tuple[int, ...] = self.value.shape
        self.dtype: np.dtype[Any] = self.value.dtype

    def __repr__(self) -> str:
        return f"lit({self.value!r})"


# The values of a flattened program as it runs: jax arrays (or tracers) by Var.
Env = dict[Var, Any]


@dataclass
class Node:
    """One primitive application of the flattened program."""

    index: int
    primitive: jcore.Primitive
    params: dict[str, Any]
    invars: list[Var | Lit]
    outvars: list[Var]
    source: str  # "file:line (function)" or ""
    # A custom_jvp/custom_vjp call kept whole (its params hold its sub-jaxprs and rules).
    opaque: bool = False
    # Whether it has side effects (a print, a callback, an ordered effect's token): such
    # nodes keep their order in the rewritten program.
    effectful: bool = False

    @property
    def name(self) -> str:
        return self.primitive.name

    def __repr__(self) -> str:
        return f"<node {self.index} {self.name} {self.invars} -> {self.outvars}>"


@dataclass
class CustomCall:
    """A custom_jvp/custom_vjp call whose body was inlined as `nodes` (contiguous, nested
    calls included). Evaluating it by binding the original call (`bind`) keeps its
    derivative rule, which the inlined primitives would lose."""

    index: int
    primitive: jcore.Primitive
    params: dict[str, Any]
    invars: list[Var | Lit]  # the call's operands
    outvars: list[Var]  # each produced by one of `nodes`
    nodes: list[Node]
    parent: int | None  # the index of the enclosing CustomCall

    @property
    def name(self) -> str:
        return self.primitive.name

    def bind(self, env: Env) -> None:
        outs = _bind(self.primitive, [read_value(env, v) for v in self.invars], self.params)
        env.update(zip(self.outvars, outs))


@dataclass
class FlatProgram:
    invars: list[Var]  # the jaxpr's inputs in order
    outvars: list[Var | Lit]
    consts: dict[Var, Any]  # non-scalar closed-over constants
    nodes: list[Node]  # topological order
    custom_calls: list[CustomCall] = field(default_factory=list)  # the inlined ones

    def evaluate(self, *args: Any) -> list[Any]:
        """Runs the flattened program with jax (each node by `primitive.bind`)."""
        env = dict(self.consts)
        env.update(zip(self.invars, args))
        run_nodes(self.nodes, env)
        return [read_value(env, v) for v in self.outvars]


def read_value(env: Env, v: Var | Lit) -> Any:
    """The value of a Var or a Lit in `env`."""
    return v.value if isinstance(v, Lit) else env[v]


def run_nodes(nodes: Sequence[Node], env: Env) -> None:
    for node in nodes:
        outs = _bind(node.primitive, [read_value(env, v) for v in node.invars], node.params)
        if not node.primitive.multiple_results:
            outs = [outs]
        env.update(zip(node.outvars, outs))


def _bind(primitive: jcore.Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
    """Applies `primitive` as jax.core.eval_jaxpr does: call-like primitives take their
    sub-jaxprs back as functions (a plain primitive's params come back unchanged). (jax leaves
    both methods unannotated.)"""
    bind_params = primitive.get_bind_params(params)  # type: ignore[no-untyped-call]
    return primitive.bind(*args, **bind_params)  # type: ignore[no-untyped-call]


def _source(eqn: jcore.JaxprEqn) -> str:
    if source_info_util is None:
        return ""
    try:
        return str(source_info_util.summarize(eqn.source_info))
    except Exception:
        return ""


def _sub_jaxpr(eqn: jcore.JaxprEqn) -> tuple[jcore.Jaxpr, list[Any]] | None:
    """The (jaxpr, consts) an inlinable eqn calls, or None."""
    keys = _INLINE.get(eqn.primitive.name)
    if keys is None:
        return None
    for key in keys:
        sub = eqn.params.get(key)
        if isinstance(sub, jcore.ClosedJaxpr):
            jaxpr, consts = sub.jaxpr, list(sub.consts)
        elif isinstance(sub, jcore.Jaxpr):
            jaxpr, consts = sub, []
        else:
            continue
        if len(jaxpr.invars) == len(eqn.invars) and len(jaxpr.outvars) == len(eqn.outvars):
            return jaxpr, consts
    return None


# Pure scalar arithmetic that `_fold` may evaluate at trace time when every operand is a
# literal: elementwise, without effects, callbacks, sub-jaxprs or randomness.
_FOLDABLE = frozenset(
    """
    abs add and ceil clamp convert_element_type cos div eq exp exp2 expm1 floor ge gt
    integer_pow is_finite le log log1p logistic lt max min mul ne neg nextafter not or pow
    rem round rsqrt select_n sign sin sqrt square sub tan tanh xor
    """.split()  # noqa: SIM905 (a table to read, not a list to edit)
)


def _fold(eqn: jcore.JaxprEqn, args: Sequence[Var | Lit]) -> list[Lit] | None:
    """The literal results of `eqn` when it is scalar arithmetic on literals (_FOLDABLE),
    computed by jax as the compiled program would; None otherwise."""
    results: list[Any] = [ov.aval for ov in eqn.outvars]
    if (
        eqn.primitive.name not in _FOLDABLE
        or eqn.effects
        or not args
        or not all(isinstance(a, Lit) and a.value.ndim == 0 for a in args)
        or not all(len(r.shape) == 0 and not _extended(r.dtype) for r in results)
    ):
        return None
    try:
        # Eagerly, also while the decorator traces inside jax.jit.
        with jax.ensure_compile_time_eval(), np.errstate(all="ignore"):
            outs = _bind(eqn.primitive, [a.value for a in args if isinstance(a, Lit)], eqn.params)
    except Exception:  # left to the compiled program, which raises what jax.jit would
        return None
    if not eqn.primitive.multiple_results:
        outs = [outs]
    return [Lit(np.asarray(o), r.dtype) for o, r in zip(outs, results)]


def flatten(closed_jaxpr: jcore.ClosedJaxpr) -> FlatProgram:
    """Inlines nested calls of `closed_jaxpr` (from jax.make_jaxpr) into a FlatProgram."""
    counter = [0]
    nodes: list[Node] = []
    consts: dict[Var, Any] = {}
    calls: list[CustomCall | None] = []
    open_calls: list[int] = []  # indices into `calls` of the calls being inlined

    def fresh(aval: Any) -> Var:
        counter[0] += 1
        return Var(counter[0], aval.shape, aval.dtype)

    def const_value(value: Any) -> Var | Lit:
        arr = np.asarray(value) if not isinstance(value, jax.Array) else value
        if np.ndim(arr) == 0:
            return Lit(np.asarray(arr))
        var = Var(counter[0] + 1, np.shape(arr), arr.dtype)
        counter[0] += 1
        consts[var] = arr
        return var

    def walk(
        jaxpr: jcore.Jaxpr,
        const_vals: list[Any],
        in_vals: Sequence[Var | Lit],
        source_prefix: str,
    ) -> list[Var | Lit]:
        env: dict[jcore.Var, Var | Lit] = {}

        def read(v: jcore.Var | jcore.Literal) -> Var | Lit:
            if isinstance(v, jcore.Literal):
                aval: Any = v.aval
                return Lit(v.val, None if _extended(aval.dtype) else aval.dtype)
            assert isinstance(v, jcore.Var)
            return env[v]

        for cv, val in zip(jaxpr.constvars, const_vals):
            env[cv] = const_value(val)
        for iv, val in zip(jaxpr.invars, in_vals):
            env[iv] = val
        for eqn in jaxpr.eqns:
            args = [read(v) for v in eqn.invars]
            sub = _sub_jaxpr(eqn)
            src = _source(eqn) or source_prefix
            outs: list[Var | Lit]
            if sub is not None and eqn.primitive.name in CUSTOM_DERIVATIVES:
                outs = inline_custom_call(eqn, sub, args, src)
            elif sub is not None:
                outs = walk(sub[0], sub[1], args, src)
            else:
                folded = _fold(eqn, args)
                if folded is not None:
                    outs = list(folded)
                else:
                    new = [fresh(ov.aval) for ov in eqn.outvars]
                    outs = list(new)
                    nodes.append(
                        Node(
                            len(nodes),
                            eqn.primitive,
                            dict(eqn.params),
                            args,
                            new,
                            src,
                            effectful=bool(eqn.effects),
                        )
                    )
            for ov, val in zip(eqn.outvars, outs):
                if not isinstance(ov, jcore.DropVar):
                    env[ov] = val
        return [read(v) for v in jaxpr.outvars]

    def inline_custom_call(
        eqn: jcore.JaxprEqn,
        sub: tuple[jcore.Jaxpr, list[Any]],
        args: list[Var | Lit],
        src: str,
    ) -> list[Var | Lit]:
        """Inlines a custom_jvp/custom_vjp call and records it (CustomCall); a call whose
        outputs are not all computed by its body (an identity with a custom gradient, a
        constant) stays one opaque node instead."""
        start, index = len(nodes), len(calls)
        calls.append(None)
        open_calls.append(index)
        outs = walk(sub[0], sub[1], args, src)
        open_calls.pop()
        produced = {v for n in nodes[start:] for v in n.outvars}
        made = [v for v in outs if isinstance(v, Var) and v in produced]
        if len(made) == len(outs) and len(set(made)) == len(made):
            parent = open_calls[-1] if open_calls else None
            calls[index] = CustomCall(
                index, eqn.primitive, dict(eqn.params), args, made, nodes[start:], parent
            )
            return outs
        del nodes[start:]
        for i in range(index, len(calls)):
            calls[i] = None  # this call and the ones nested in it
        new = [fresh(ov.aval) for ov in eqn.outvars]
        nodes.append(
            Node(
                len(nodes),
                eqn.primitive,
                dict(eqn.params),
                args,
                new,
                src,
                opaque=True,
                effectful=bool(eqn.effects),
            )
        )
        return list(new)

    jaxpr = closed_jaxpr.jaxpr
    invars = [fresh(v.aval) for v in jaxpr.invars]
    outvars = walk(jaxpr, list(closed_jaxpr.consts), invars, "")
    kept = [c for c in calls if c is not None]
    renumber = {c.index: i for i, c in enumerate(kept)}
    for c in kept:
        c.index = renumber[c.index]
        c.parent = None if c.parent is None else renumber.get(c.parent)
    return FlatProgram(invars, outvars, consts, nodes, kept)

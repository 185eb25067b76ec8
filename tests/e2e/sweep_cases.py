"""The functions the sweep (test_sweep.py) wraps with mirage_jax.optimize: the public
functions of jax.numpy, jax.nn, jax.lax and jax.random, each with arguments it accepts.

Most are found by trying, for each public name, a few argument patterns in turn (one float32
matrix, two, an int32 matrix, a PRNG key and a shape, ...) with jax.eval_shape: the first
pattern that traces is the case. A name no pattern fits becomes an error case instead, when
jax.jit raises for it the same message every time (the sweep then expects that exception,
word for word). Functions that need static arguments, control flow with fusible work inside,
and the ones whose first fitting pattern says little are written out in `_WRITTEN`.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import io_callback

_RNG = np.random.default_rng(0)


def _normal(*shape: int) -> jax.Array:
    return jnp.asarray(_RNG.standard_normal(shape), jnp.float32)


X = _normal(3, 4)
Y = _normal(3, 4)
Z = _normal(3, 4)
SQUARE = _normal(4, 4) + 4 * jnp.eye(4, dtype=jnp.float32)
W = _normal(4, 8)
VEC = _normal(4)
INT = jnp.asarray(_RNG.integers(-5, 6, (3, 4)), jnp.int32)
POS_INT = jnp.asarray(_RNG.integers(1, 6, (3, 4)), jnp.int32)
U = jnp.asarray(_RNG.integers(0, 200, (3, 4)), jnp.uint8)
B = jnp.asarray(_RNG.integers(0, 2, (3, 4)), bool)
KEY = jax.random.key(0)
_DEVICE = jax.devices()[0]
RAW_KEY = jax.random.PRNGKey(1)


@dataclass(frozen=True)
class Case:
    name: str  # "module.function[pattern]"
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    error: bool = False  # jax.jit raises for it: the sweep expects the same exception


# Argument patterns tried in order; a name takes the first under which it traces.
_ARRAY_PATTERNS: list[tuple[str, tuple[Any, ...]]] = [
    ("f32", (X,)),
    ("f32,f32", (X, Y)),
    ("f32,f32,f32", (X, Y, Z)),
    ("i32", (INT,)),
    ("i32,i32", (INT, POS_INT)),
    ("bool", (B,)),
    ("bool,bool", (B, B)),
    ("square", (SQUARE,)),
]
_RANDOM_PATTERNS: list[tuple[str, tuple[Any, ...], Callable[[Callable[..., Any]], Any]]] = [
    ("key,shape", (KEY,), lambda f: lambda k: f(k, (3, 4))),
    ("key", (KEY,), lambda f: f),
    ("key,f32", (KEY, X), lambda f: f),
    ("key,i32", (KEY, POS_INT), lambda f: f),
    ("i32", (jnp.int32(7),), lambda f: f),
]

# Names not to call: they touch files or global state, or are not functions of arrays.
_SKIP = {
    "jax.numpy": {
        "load",
        "save",
        "savez",
        "fromfile",
        "fromiter",
        "fromstring",
        "frombuffer",
        "printoptions",
        "set_printoptions",
        "get_printoptions",
        "show_config",
        "array_repr",
        "array_str",
        "ndarray",
        "ufunc",
        "dtype",
        "finfo",
        "iinfo",
        "issubdtype",
        "isdtype",
        "promote_types",
        "result_type",
        "can_cast",
        "vectorize",
        "frompyfunc",
        "piecewise",
        "einsum_path",
    },
    "jax.nn": {"initializers"},
    "jax.lax": set(),
    "jax.random": {"key_impl", "PRNGKeyArray", "default_prng_impl", "resolve_prng_impl"},
}


def _traces(fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    try:
        out = jax.eval_shape(fn, *args)
    except Exception:
        return False
    return all(hasattr(leaf, "dtype") for leaf in jax.tree_util.tree_leaves(out))


def _jit_error(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[type, str] | None:
    try:
        jax.jit(fn)(*args)
    except Exception as e:
        return type(e), str(e)
    return None


# Errors that only say the pattern lacks an argument: nothing of the function runs.
_ARITY = re.compile(r"missing \d+ required|positional argument|unexpected keyword")


def _telling_error(fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    """jax.jit raises for it, with one message every time (no address of a fresh object in
    it), and not merely for a missing argument."""
    first = _jit_error(fn, args)
    return first is not None and not _ARITY.search(first[1]) and first == _jit_error(fn, args)


def _public(module: Any, skip: set[str]) -> list[tuple[str, Callable[..., Any]]]:
    """The module's public functions, each once (an alias such as jnp.acos of jnp.arccos is
    the same object). Classes are left out: scalar types (jnp.float32, ...), exceptions and
    warnings; a few scalar types are written cases."""
    out, seen = [], set()
    for name in sorted(dir(module)):
        if name.startswith("_") or name in skip:
            continue
        value = getattr(module, name)
        if callable(value) and not isinstance(value, (type, type(np))) and id(value) not in seen:
            seen.add(id(value))
            out.append((name, value))
    return out


def _probed(module_name: str, module: Any, stride: int) -> list[Case]:
    cases = []
    random = module is jax.random
    for name, fn in _public(module, _SKIP[module_name])[::stride]:
        if stride > 1 and name in _SLOW_TO_COMPILE.get(module_name, ()):
            continue
        tried = []
        if random:
            for label, args, make in _RANDOM_PATTERNS:
                f = make(fn)
                tried.append((label, f, args))
        else:
            tried = [(label, fn, args) for label, args in _ARRAY_PATTERNS]
        for label, f, args in tried:
            if _traces(f, args):
                cases.append(Case(f"{module_name}.{name}[{label}]", f, args))
                break
        else:
            label, f, args = tried[0]
            if _telling_error(f, args):
                cases.append(Case(f"{module_name}.{name}[{label}]", f, args, error=True))
    return cases


@jax.custom_jvp
def _custom_jvp_norm(x: jax.Array) -> jax.Array:
    return x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)


@_custom_jvp_norm.defjvp
def _custom_jvp_norm_rule(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return _custom_jvp_norm(x), t


@jax.custom_vjp
def _custom_vjp_sum(x: jax.Array) -> jax.Array:
    return jnp.sum(x * x, -1)


_custom_vjp_sum.defvjp(lambda x: (_custom_vjp_sum(x), x), lambda x, g: (2 * x * g[..., None],))


def _written() -> list[Case]:
    """Calls no argument pattern finds: static arguments, control flow around fusible work,
    effects, callbacks, custom derivatives, layouts a model uses."""
    dot_batch = (((2,), (1,)), ((0,), (0,)))
    c = [
        (
            "lax.dot_general[batched]",
            lambda a, b: lax.dot_general(a, b, dot_batch),
            (_normal(2, 3, 4), _normal(2, 4, 5)),
        ),
        (
            "lax.dot_general[nt]",
            lambda a, b: lax.dot_general(a, b, (((1,), (1,)), ((), ()))),
            (X, Y),
        ),
        (
            "lax.conv_general_dilated",
            lambda a, k: lax.conv_general_dilated(a, k, (1, 1), "SAME"),
            (_normal(1, 2, 5, 5), _normal(3, 2, 3, 3)),
        ),
        (
            "lax.reduce_window",
            lambda a: lax.reduce_window(a, 0.0, lax.add, (2, 2), (1, 1), "VALID"),
            (X,),
        ),
        ("lax.dynamic_slice", lambda a, i: lax.dynamic_slice(a, (i, 0), (2, 2)), (X, jnp.int32(1))),
        (
            "lax.dynamic_update_slice",
            lambda a, b: lax.dynamic_update_slice(a, b, (1, 1)),
            (X, _normal(2, 2)),
        ),
        ("lax.slice", lambda a: lax.slice(a, (0, 1), (2, 4)), (X,)),
        ("lax.pad", lambda a: lax.pad(a, 0.0, [(1, 0, 0), (0, 2, 1)]), (X,)),
        ("lax.rev", lambda a: lax.rev(a, (0,)), (X,)),
        ("lax.broadcast_in_dim", lambda a: lax.broadcast_in_dim(a, (2, 4), (1,)), (VEC,)),
        ("lax.broadcast", lambda a: lax.broadcast(a, (2,)), (X,)),
        ("lax.reshape", lambda a: lax.reshape(a, (4, 3)), (X,)),
        ("lax.transpose", lambda a: lax.transpose(a, (1, 0)), (X,)),
        ("lax.squeeze", lambda a: lax.squeeze(a, (0,)), (X[None],)),
        ("lax.expand_dims", lambda a: lax.expand_dims(a, (1,)), (X,)),
        ("lax.concatenate", lambda a, b: lax.concatenate([a, b], 1), (X, Y)),
        ("lax.integer_pow", lambda a: lax.integer_pow(a, 3), (X,)),
        ("lax.reduce_precision", lambda a: lax.reduce_precision(a, 5, 10), (X,)),
        ("lax.convert_element_type", lambda a: lax.convert_element_type(a, jnp.bfloat16), (X,)),
        ("lax.bitcast_convert_type", lambda a: lax.bitcast_convert_type(a, jnp.int32), (X,)),
        ("lax.iota", lambda: lax.iota(jnp.int32, 5), ()),
        ("jax.numpy.float32[i32]", jnp.float32, (INT,)),
        ("jax.numpy.bfloat16[f32]", jnp.bfloat16, (X,)),
        ("jax.numpy.int8[f32]", jnp.int8, (X,)),
        ("jax.numpy.bool_[f32]", jnp.bool_, (X,)),
        ("lax.top_k", lambda a: lax.top_k(a, 2), (X,)),
        ("lax.sort[multi]", lambda a, b: lax.sort((a, b), num_keys=1), (X, Y)),
        ("lax.argmax", lambda a: lax.argmax(a, 1, jnp.int32), (X,)),
        ("lax.cumsum", lambda a: lax.cumsum(a, 1), (X,)),
        ("lax.cummax", lambda a: lax.cummax(a, 0), (X,)),
        ("lax.cumlogsumexp", lambda a: lax.cumlogsumexp(a, 1), (X,)),
        ("lax.reduce[custom]", lambda a: lax.reduce(a, 0.0, lambda p, q: p + q * q, (1,)), (X,)),
        ("lax.select_n", lambda p, a, b: lax.select_n(p, a, b), (B, X, Y)),
        ("lax.clamp", lambda a: lax.clamp(-0.5, a, 0.5), (X,)),
        ("lax.shift_left", lambda a: lax.shift_left(a, jnp.int32(2)), (INT,)),
        ("lax.population_count", lambda a: lax.population_count(a), (U,)),
        (
            "lax.cond[fusible]",
            lambda p, a, w: lax.cond(
                p, lambda: jnp.sum(jnp.exp(a @ w), -1), lambda: jnp.sum(a @ w, -1)
            ),
            (jnp.bool_(True), X, W),
        ),
        (
            "lax.switch[fusible]",
            lambda i, a, w: lax.switch(i, [lambda: jnp.max(a @ w, -1), lambda: jnp.sum(a @ w, -1)]),
            (jnp.int32(1), X, W),
        ),
        (
            "lax.scan[fusible]",
            lambda a, w: lax.scan(
                lambda carry, row: (carry + jnp.sum(row @ w), jnp.exp(row @ w)), 0.0, a[:, None, :]
            ),
            (X, W),
        ),
        (
            "lax.while_loop[fusible]",
            lambda a, w: lax.while_loop(
                lambda s: s[0] < 3,
                lambda s: (s[0] + 1, s[1] + jnp.sum(a @ w, -1)),
                (0, jnp.zeros(3)),
            )[1],
            (X, W),
        ),
        (
            "lax.fori_loop[fusible]",
            lambda a, w: lax.fori_loop(
                0, 3, lambda i, acc: acc + jax.nn.softmax(a @ w, -1), jnp.zeros((3, 8))
            ),
            (X, W),
        ),
        ("lax.map[fusible]", lambda a, w: lax.map(lambda r: jnp.sum(r @ w), a), (X, W)),
        ("lax.associative_scan", lambda a: lax.associative_scan(jnp.add, a, axis=1), (X,)),
        ("lax.stop_gradient[region]", lambda a, w: jnp.sum(lax.stop_gradient(a @ w), -1), (X, W)),
        ("lax.optimization_barrier", lambda a: lax.optimization_barrier(a * 2), (X,)),
        ("jax.nn.gelu[approximate=False]", lambda a: jax.nn.gelu(a, approximate=False), (X,)),
        ("jax.nn.one_hot", lambda i: jax.nn.one_hot(i, 6), (POS_INT,)),
        (
            "jax.nn.dot_product_attention",
            lambda q, k, v: jax.nn.dot_product_attention(q, k, v),
            (_normal(1, 3, 2, 4), _normal(1, 5, 2, 4), _normal(1, 5, 2, 4)),
        ),
        ("jax.nn.softmax[where]", lambda a, m: jax.nn.softmax(a, where=m), (X, B)),
        ("jax.random.categorical", lambda k, a: jax.random.categorical(k, a, -1), (KEY, X)),
        ("jax.random.choice", lambda k: jax.random.choice(k, 10, (3,), replace=False), (KEY,)),
        ("jax.random.split[raw key]", lambda k: jax.random.split(k, 3), (RAW_KEY,)),
        ("jax.random.normal[raw key]", lambda k: jax.random.normal(k, (3, 4)), (RAW_KEY,)),
        (
            "jax.random.dropout[region]",
            lambda k, a, w: jnp.where(
                jax.random.bernoulli(k, 0.5, (3, 8)), jax.nn.softmax(a @ w, -1) / 0.5, 0.0
            ),
            (KEY, X, W),
        ),
        ("jax.numpy.var[ddof]", lambda a: jnp.var(a, -1, ddof=1), (X,)),
        ("jax.numpy.std[region]", lambda a, w: jnp.std(a @ w, -1), (X, W)),
        ("jax.numpy.einsum", lambda a, b: jnp.einsum("ij,kj->ik", a, b), (X, Y)),
        ("jax.numpy.linalg.norm", lambda a: jnp.linalg.norm(a, axis=-1), (X,)),
        ("jax.numpy.linalg.solve", lambda a, b: jnp.linalg.solve(a, b), (SQUARE, VEC)),
        ("jax.numpy.fft.fft", lambda a: jnp.fft.fft(a), (X,)),
        ("jax.numpy.int_ops[uint8]", lambda a: (a * 3 + 7) // 2, (U,)),
        ("jax.numpy.complex", lambda a, b: jnp.sum(lax.complex(a, b) * 1j, -1), (X, Y)),
        ("jax.numpy.zero_size", lambda a, w: jnp.sum(a @ w, -1), (_normal(0, 4), W)),
        ("jax.numpy.rank5", lambda a: jax.nn.softmax(a, -1), (_normal(2, 1, 2, 3, 4),)),
        ("jax.numpy.div0[region]", lambda a, w: (a @ w) / 0.0, (X, W)),
        ("jax.numpy.sum_div0[region]", lambda a, w: jnp.sum(a @ w, -1) / 0.0, (X, W)),
        (
            "jax.numpy.bf16[region]",
            lambda a, w: jax.nn.softmax(a @ w, -1),
            (X.astype(jnp.bfloat16), W.astype(jnp.bfloat16)),
        ),
        ("jax.debug.print[region]", lambda a, w: _printed(jnp.sum(a @ w, -1)), (X, W)),
        (
            "jax.pure_callback[region]",
            lambda a, w: jax.pure_callback(
                lambda v: np.asarray(v) * 2,
                jax.ShapeDtypeStruct((3,), jnp.float32),
                jnp.sum(a @ w, -1),
            ),
            (X, W),
        ),
        (
            "jax.experimental.io_callback[ordered,region]",
            lambda a, w: io_callback(
                lambda v: np.asarray(v) + 1,
                jax.ShapeDtypeStruct((3,), jnp.float32),
                jnp.sum(a @ w, -1),
                ordered=True,
            ),
            (X, W),
        ),
        (
            "jax.lax.with_sharding_constraint[region]",
            lambda a, w: jnp.sum(
                lax.with_sharding_constraint(a @ w, jax.sharding.SingleDeviceSharding(_DEVICE)),
                -1,
            ),
            (X, W),
        ),
        ("jax.custom_jvp[region]", lambda a, w: _custom_jvp_norm(a) @ w, (X, W)),
        ("jax.custom_vjp[region]", lambda a, w: _custom_vjp_sum(a @ w), (X, W)),
        (
            "jax.checkpoint[region]",
            lambda a, w: jax.checkpoint(lambda p, q: jnp.sum(jnp.exp(p @ q), -1))(a, w),
            (X, W),
        ),
        (
            "jax.none_leaves",
            lambda t: jnp.sum(t["x"] @ t["w"], -1) if t["b"] is None else 0,
            ({"x": X, "w": W, "b": None},),
        ),
        (
            "jax.numpy.where[bool,region]",
            lambda m, a, w: jnp.where(m, jnp.sum(a @ w, -1)[:, None], 0.0),
            (B, X, W),
        ),
    ]
    cases = [Case(name, fn, args) for name, fn, args in c]
    # Errors people make, which jax.jit reports with its own words.
    errors = [
        ("error.matmul_shapes", lambda a, b: a @ b, (X, Y)),
        ("error.python_if_on_tracer", lambda a: a if a.sum() > 0 else -a, (X,)),
        ("error.shape_from_tracer", lambda a, n: jnp.zeros(n), (X, jnp.int32(3))),
        ("error.reshape_size", lambda a: a.reshape(5, 5), (X,)),
        ("error.random_with_array_key", lambda a: jax.random.normal(a, (2,)), (X,)),
        ("error.bad_axis", lambda a: jnp.sum(a, axis=4), (X,)),
        ("error.dynamic_slice_rank", lambda a: lax.dynamic_slice(a, (0,), (1,)), (X,)),
        ("error.concat_dtypes", lambda a, i: lax.concatenate([a, i], 0), (X, INT)),
        ("error.non_array_argument", lambda a, s: a * len(s), (X, "text")),
        ("error.python_int_of_tracer", lambda a: int(a[0, 0]), (X,)),
    ]
    cases += [Case(name, fn, args, error=True) for name, fn, args in errors]
    return cases


def _printed(y: jax.Array) -> jax.Array:
    jax.debug.print("sweep: {}", y[0])
    return y


GROUPS = ("jax.numpy", "jax.nn", "jax.lax", "jax.random", "written")
_MODULES = {"jax.numpy": jnp, "jax.nn": jax.nn, "jax.lax": lax, "jax.random": jax.random}


# Each case costs two XLA compilations (jax.jit's and optimize's) plus its probing, so the
# default sweep takes every k-th public name in alphabetical order (a spread, not a choice)
# and leaves out the samplers whose XLA compilation alone takes seconds (rejection loops);
# MIRAGE_JAX_SWEEP=full takes every name.
_STRIDE = {"jax.numpy": 4, "jax.lax": 2, "jax.nn": 1, "jax.random": 3}
_SLOW_TO_COMPILE = {
    "jax.random": {
        "beta", "binomial", "chisquare", "dirichlet", "f", "gamma", "loggamma", "maxwell",
        "double_sided_maxwell", "poisson", "t", "wald", "weibull_min", "generalized_normal",
    },
}  # fmt: skip


@functools.cache
def cases(group: str, full: bool = False) -> tuple[Case, ...]:
    """The cases of one of GROUPS: a module's probed functions, or the written ones; `full`:
    all of them, else the default selection."""
    if group == "written":
        return tuple(_written())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations of the names probed
        return tuple(_probed(group, _MODULES[group], 1 if full else _STRIDE[group]))

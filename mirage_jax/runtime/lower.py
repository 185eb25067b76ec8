"""Lowering a KernelGraph to a function of jax arrays.

Predefined kernel ops become lax/jnp ops, so XLA runs them with its own GEMMs and fusions;
each customized op is handed to a backend callback (for the CPU backend, one
jax.ffi.ffi_call to its generated kernel). The graph is read once, here, so tracing the
result touches no C++ objects.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from math import prod
from typing import cast

import jax
import jax.numpy as jnp
from jax import lax

# The formulas of docs/ir-semantics.md; gelu is the tanh approximation, gelu_erf the exact
# form.
_UNARY: dict[str, Callable] = {
    "exp": jnp.exp,
    "square": jnp.square,
    "sqrt": jnp.sqrt,
    "rsqrt": lax.rsqrt,
    "silu": jax.nn.silu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=True),
    "relu": jax.nn.relu,
    "sigmoid": jax.nn.sigmoid,
    "neg": jnp.negative,
    "recip": jnp.reciprocal,
    "erf": lax.erf,
    "erfc": lax.erfc,
    "gelu_erf": lambda x: 0.5 * x * lax.erfc(x * -0.7071067811865476),
}
_BINARY: dict[str, Callable] = {
    "add": jnp.add,
    "sub": jnp.subtract,
    "mul": jnp.multiply,
    "div": jnp.divide,
}
_REDUCE: dict[str, Callable] = {"sum": jnp.sum, "mean": jnp.mean, "max": jnp.max}


@dataclasses.dataclass(frozen=True)
class _Step:
    """One kernel-graph op, copied out of the C++ graph."""

    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    dtypes: tuple[str, ...]  # of the outputs
    scalar: float | None
    dim: int | None
    reduce_kind: str | None
    index: int  # position in the graph's op list


# A backend's lowering of customized op `index`: (op index, input arrays, the shape to give
# each output) -> output arrays. An input array, and an output's shape, may be any reshape
# of the op's own tensor (a kernel reads and writes row-major buffers).
CustomizedLowering = Callable[
    [int, Sequence[jax.Array], Sequence[tuple[int, ...]]], Sequence[jax.Array]
]
Shapes = tuple[tuple[int, ...], ...]


def _predefined(step: _Step, args: list):
    kind = step.kind
    if kind in _UNARY:
        return _UNARY[kind](args[0])
    if kind == "mul_scalar":
        return args[0] * step.scalar  # a Python float is weakly typed: the dtype stays
    if kind == "add_scalar":
        return args[0] + step.scalar
    if kind in _BINARY:
        return _BINARY[kind](args[0], args[1])
    if kind == "select":  # jnp.where(mask, x, c): the mask is 0/1 (any nonzero keeps x)
        return jnp.where(args[1] != 0, args[0], jnp.asarray(step.scalar, args[0].dtype))
    if kind == "matmul":
        return jnp.matmul(args[0], args[1], precision=lax.Precision.HIGHEST)
    if kind == "reduce":
        return _REDUCE[cast(str, step.reduce_kind)](args[0], axis=step.dim, keepdims=True)
    if kind == "rms_norm":
        x = args[0]
        eps = cast(float, step.scalar)
        return x / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps)
    if kind == "concat":
        return jnp.concatenate([args[0], args[1]], axis=step.dim)
    raise NotImplementedError(f"lowering: kernel op '{kind}' has no lax lowering")


def lower_kernel_graph(graph, lower_customized: CustomizedLowering) -> Callable:
    """A function of one array per graph input (in order) returning a tuple with one array
    per graph output.

    Called with `reshaped_inputs=True` it takes any reshape of each input, and with
    `out_shapes` it returns each output in that shape: a region hands its values over as the
    model shaped them, and a kernel then reads and writes them as they are, with no reshape
    between it and XLA's ops (both are static arguments under jax.jit)."""
    steps = [
        _Step(
            op.kind,
            tuple(t.id for t in op.inputs),
            tuple(t.id for t in op.outputs),
            tuple(t.dtype for t in op.outputs),
            op.scalar,
            op.dim,
            op.reduce_kind,
            op.index,
        )
        for op in graph.ops
    ]
    shapes = {t.id: tuple(t.shape) for op in graph.ops for t in op.outputs}
    shapes.update({t.id: tuple(t.shape) for t in graph.inputs})
    inputs = [(t.id, t.name, t.shape, jnp.dtype(t.dtype)) for t in graph.inputs]
    outputs = [t.id for t in graph.outputs]
    label = graph.label

    def check(i: int, array: jax.Array, name: str, shape, dtype, reshaped: bool) -> None:
        fits = array.size == prod(shape) if reshaped else array.shape == shape
        if not fits:
            what = f"shape {shape}" + (" or a reshape of it" if reshaped else "")
            raise ValueError(f"{label}: input {i} ({name}) must have {what}, got {array.shape}")
        if array.dtype != dtype:
            raise TypeError(
                f"{label}: input {i} ({name}) must have dtype {dtype}, got {array.dtype}"
            )

    def run(*args, out_shapes: Shapes | None = None, reshaped_inputs: bool = False):
        if len(args) != len(inputs):
            raise TypeError(f"{label} takes {len(inputs)} input arrays, got {len(args)}")
        if out_shapes is not None and len(out_shapes) != len(outputs):
            raise TypeError(f"{label} has {len(outputs)} outputs, got {len(out_shapes)} shapes")
        wanted: dict[int, tuple[int, ...]] = {}
        for tid, shape in zip(outputs, out_shapes or ()):
            if prod(shape) != prod(shapes[tid]):
                raise ValueError(f"{label}: output shape {shape} is not a reshape of {shapes[tid]}")
            wanted.setdefault(tid, tuple(shape))
        values = {}
        for i, (arg, (tid, name, shape, dtype)) in enumerate(zip(args, inputs)):
            array = jnp.asarray(arg)
            check(i, array, name, shape, dtype, reshaped_inputs)
            values[tid] = array
        for step in steps:
            if step.kind in ("input", "output"):
                continue
            args_of_step = [values[t] for t in step.inputs]
            if step.kind == "customized":
                result_shapes = [wanted.get(t, shapes[t]) for t in step.outputs]
                results = lower_customized(step.index, args_of_step, result_shapes)
            else:
                args_of_step = [a.reshape(shapes[t]) for a, t in zip(args_of_step, step.inputs)]
                results = [_predefined(step, args_of_step)]
            for tid, dtype, value in zip(step.outputs, step.dtypes, results):
                values[tid] = value.astype(dtype) if value.dtype != jnp.dtype(dtype) else value
        if out_shapes is None:
            return tuple(values[t].reshape(shapes[t]) for t in outputs)
        return tuple(values[t].reshape(s) for t, s in zip(outputs, out_shapes))

    return run

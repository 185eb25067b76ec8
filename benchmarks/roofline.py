"""The machine's roofline, measured, and the work a program must do.

Peak bandwidth is the rate of a large jitted read (a sum over an array much larger than the
caches); peak flop/s is the rate of a large float32 matmul. Both are measured on the device
the benchmark runs on, in the same run, so the fractions compare like with like.

A program's compulsory work is the bytes of its inputs and outputs (each read or written
once) and its flops: exact for matmuls (2·m·n·k), one per element for every other arithmetic
primitive, none for layout primitives (broadcast, reshape, transpose, casts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from timing import median_seconds

# Primitives that move or relabel data without arithmetic.
_LAYOUT = {
    "broadcast_in_dim",
    "reshape",
    "transpose",
    "convert_element_type",
    "squeeze",
    "expand_dims",
    "stop_gradient",
    "copy",
    "copy_p",
    "slice",
    "concatenate",
    "dynamic_slice",
    "select_n",
    "iota",
}


@dataclass(frozen=True)
class Roofline:
    bandwidth: float  # bytes/s of a large jitted read
    flops: float  # flop/s of a large float32 matmul
    read_bytes: int  # the size of the array read
    matmul_n: int  # the matmul's m = n = k

    def time_bound(self, nbytes: float, flops: float) -> float:
        """The least time the work can take: the larger of its memory and compute time."""
        return max(nbytes / self.bandwidth, flops / self.flops)


def measure(device=None, quick: bool = False, runs: int = 10) -> Roofline:
    """Measures bandwidth and matmul flop/s on `device` (default: jax's default device)."""
    read_mib = 64 if quick else 512
    n = 1024 if quick else 2048
    big = jax.device_put(jnp.ones((read_mib * 1024 * 1024 // 4,), jnp.float32), device)
    read = jax.jit(jnp.sum)
    bandwidth = big.nbytes / median_seconds(read, [big], runs)
    rng = np.random.default_rng(0)
    a = jax.device_put(rng.standard_normal((n, n), dtype=np.float32), device)
    b = jax.device_put(rng.standard_normal((n, n), dtype=np.float32), device)
    matmul = jax.jit(jnp.matmul)
    flops = 2 * n**3 / median_seconds(matmul, [a, b], max(3, runs // 2))
    del big
    return Roofline(bandwidth=bandwidth, flops=flops, read_bytes=read_mib * 1024 * 1024, matmul_n=n)


def compulsory_bytes(args, outputs) -> int:
    """Bytes of every input and output array (or shape, as jax.eval_shape gives them): each
    must cross memory at least once."""
    leaves = jax.tree_util.tree_leaves((args, outputs))
    return int(sum(math.prod(np.shape(x)) * np.dtype(x.dtype).itemsize for x in leaves))


def count_flops(fn, args) -> int:
    """Flops of fn(*args) from its jaxpr (see the module docstring for what counts)."""
    return int(_jaxpr_flops(jax.make_jaxpr(fn)(*args).jaxpr))


def has_loop(fn, args) -> bool:
    """Whether fn(*args) runs a loop (while, scan), whose body the counts above see once."""
    return _has_loop(jax.make_jaxpr(fn)(*args).jaxpr)


def _has_loop(jaxpr) -> bool:
    return any(
        eqn.primitive.name in ("while", "scan") or any(map(_has_loop, _sub_jaxprs(eqn.params)))
        for eqn in jaxpr.eqns
    )


def _size(aval) -> int:
    return int(math.prod(getattr(aval, "shape", ())))


def _sub_jaxprs(params):
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(item, "eqns"):
                yield item
            elif hasattr(item, "jaxpr") and hasattr(item.jaxpr, "eqns"):
                yield item.jaxpr


def _jaxpr_flops(jaxpr) -> int:
    total = 0
    for eqn in jaxpr.eqns:
        subs = list(_sub_jaxprs(eqn.params))
        if subs:
            total += sum(_jaxpr_flops(s) for s in subs)
            continue
        name = eqn.primitive.name
        if name == "dot_general":
            (lhs_contract, _), _ = eqn.params["dimension_numbers"]
            lhs_shape = eqn.invars[0].aval.shape
            k = math.prod(lhs_shape[d] for d in lhs_contract)
            total += 2 * _size(eqn.outvars[0].aval) * k
        elif name not in _LAYOUT:
            total += max(_size(v.aval) for v in (*eqn.invars, *eqn.outvars))
    return total

"""Property tests for @mirage_jax.optimize: random small programs built from
the supported primitives (matmuls in both layouts, reductions, softmax, RMSNorm, the
elementwise ops), with an unsupported op (sin) sometimes in between to split regions.
For each: optimize(f)(x) is close to jax.jit(f)(x), and no region is silently dropped:
every region the partitioner finds has a report, kernel or XLA with a reason, a fallback
for a failure was warned, and every kernel shows in the HLO."""

import warnings
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import normwise

import mirage_jax as mj
from mirage_jax.frontend import partition
from mirage_jax.runtime import profile as _profile
from mirage_jax.superopt import float_check as _float_check
from mirage_jax.superopt import search as _search

M = 8
# Tiny searches: what matters here is that whatever is chosen is right and accounted for.
CONFIG = _search.SearchConfig(max_kernel_ops=1, max_block_ops=5, time_budget_s=3)
WARNED = ("not expressible", "superoptimize failed")

# name -> (function of (h, weights), how it changes the width); weights is an iterator over
# extra inputs drawn for the step, shaped by `needs`.
UNARY = {
    "exp_neg_square": lambda h: jnp.exp(-h * h),
    "logistic": jax.nn.sigmoid,
    "silu": jax.nn.silu,
    "gelu": jax.nn.gelu,  # the tanh form, recognized as one op
    "tanh": jnp.tanh,
    "square_scaled": lambda h: h * h * 0.25,
    "sqrt_plus": lambda h: jnp.sqrt(h * h + 1.0),
    "rational": lambda h: h / (1.0 + h * h),
    "affine": lambda h: 0.5 - h * 2.0,
    "rms_norm": lambda h: h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + 1e-5),
    "softmax": lambda h: jax.nn.softmax(h, axis=-1),
    "center": lambda h: h - jnp.mean(h, axis=-1, keepdims=True),
    "max_shift": lambda h: h - jnp.max(h, axis=-1, keepdims=True),
    "row_sum": lambda h: jnp.sum(h, axis=-1, keepdims=True) * h,
    "sin": jnp.sin,  # not a kernel-graph primitive: splits regions
}
WITH_INPUT = ("matmul", "matmul_t", "scale_by")


@st.composite
def programs(draw):
    steps = draw(
        st.lists(st.sampled_from(sorted(UNARY) + list(WITH_INPUT)), min_size=1, max_size=3)
    )
    if not any(s in ("matmul", "matmul_t") for s in steps):
        steps.insert(draw(st.integers(0, len(steps))), "matmul")
    width = draw(st.sampled_from([16, 32]))
    widths = [width]
    for s in steps:
        if s in ("matmul", "matmul_t"):
            widths.append(draw(st.sampled_from([16, 32])))
    return steps, widths, draw(st.integers(0, 2**16))


def build(steps, widths, seed):
    """(f, args): f(x, *weights) applies the steps to x [M, widths[0]]."""
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal((M, widths[0]))]
    width, next_width = widths[0], iter(widths[1:])
    for s in steps:
        if s in ("matmul", "matmul_t"):
            n = next(next_width)
            shape = (width, n) if s == "matmul" else (n, width)
            args.append(rng.standard_normal(shape) / np.sqrt(width))
            width = n
        elif s == "scale_by":
            args.append(rng.standard_normal(width))
    args = [jnp.asarray(a, jnp.float32) for a in args]

    def f(x, *weights):
        it = iter(weights)
        h = x
        for s in steps:
            if s == "matmul":
                h = h @ next(it)
            elif s == "matmul_t":
                h = h @ next(it).T
            elif s == "scale_by":
                h = h * next(it)
            else:
                h = UNARY[s](h)
        return h

    return f, args


@settings(
    max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(programs(), st.sampled_from([True, True, False]))
# Two regions split by sin, each with a fusable prologue, as well as the random ones.
@example((["exp_neg_square", "matmul", "sin", "rms_norm", "matmul_t"], [32, 16, 32], 1), True)
def test_random_programs_match_jit_and_account_for_every_region(program, kernels_win):
    """kernels_win: every candidate times faster than XLA (so kernels run whenever the
    search finds one), or slower (so none may run)."""
    steps, widths, seed = program
    f, args = build(steps, widths, seed)
    timings = (
        (lambda fns, a, **_: ({n: (1.0 if n == "xla" else 0.5) for n in fns}, 1))
        if kernels_win
        else (lambda fns, a, **_: ({n: (0.5 if n == "xla" else 1.0) for n in fns}, 1))
    )
    opt = mj.optimize(f, config=CONFIG)
    with (
        mock.patch.object(_profile, "median_times", timings),
        warnings.catch_warnings(record=True) as record,
    ):
        warnings.simplefilter("always")
        got = opt(*args)
        reports = opt.regions(*args)
        hlo = jax.jit(opt).lower(*args).as_text()
    want = jax.jit(f)(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert normwise(got, want) < _float_check.tolerance(["float32"]), (steps, reports)

    regions = partition(jax.make_jaxpr(f)(*args)).regions
    assert [r.primitives for r in reports] == [r.primitives for r in regions]
    assert all(r.chosen in ("kernel", "xla") and r.reason for r in reports)
    warned = [str(w.message) for w in record if "mirage_jax.optimize" in str(w.message)]
    failed = [r for r in reports if r.reason.startswith(WARNED)]
    assert len(warned) == len(failed)
    kernels = [r for r in reports if r.chosen == "kernel"]
    assert hlo.count("mj_cpu_") >= len(kernels)
    if not kernels_win:
        assert not kernels and "custom_call" not in hlo

"""erf and erfc as lax.erf and lax.erfc have them: erf(±0) = ±0, erf(±inf) = ±1,
erf(NaN) = NaN, odd and exact to the last bits near 0 (subnormals) and saturated far out;
erfc = 1 - erf computed whole, so its tail (erfc(9) ~ 4e-37) is not lost to cancellation.
GELU's exact form as jax.nn.gelu(approximate=False) writes it, 0.5·x·erfc(-x/√2), runs
inside a block graph after a matmul.

Each graph runs as generated CPU kernels (`mj.compile`, the kernel-level ops lowered to XLA),
as the float64 interpreter (held to math.erf, the C library's double erf) and, where the CUDA
toolkit is installed, as generated CUDA kernels (one nvcc compile, and the host emulation of
tests/cuda_host_emulation.h).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from test_codegen_cuda import (  # noqa: F401 (fixtures)
    ARCHS,
    archs,
    build_emulation,
    cuda_include,
    kernels_of,
    nvcc,
    run_kernel,
)
from test_nan_semantics import assert_like_xla, xla_outputs

import mirage_jax as mj
from mirage_jax.runtime import toolchain

NAN, INF = np.nan, np.inf
INV_SQRT2 = float(np.float32(0.7071067811865476))  # the constant jax.nn.gelu writes

# 0, -0, ±inf, NaN, huge, subnormal, the linear range, the saturation point of erf in
# float32, and erfc's tail (still normal in float32).
SPECIAL = [0.0, -0.0, INF, -INF, NAN, 1e30, -1e30, 1e-40, -1e-40, 1e-45, 1e-20, 0.5, -0.5]
SPECIAL += [1.0, -2.0, 3.9, -3.9, 4.0, 6.0, -6.0, 9.0, -9.0, 2.5, -2.5, 1e4, -1e4, 0.1, -0.1]
SPECIAL += [0.75, -0.75, 1.5, -1.5]


def special_rows() -> np.ndarray:
    x = np.asarray(SPECIAL, np.float64)
    assert x.size == 32
    return x.reshape(2, 16)


def erf_graph():
    """X[4, 16]: erf and erfc at block level (blocks of two rows), GELU's erfc form after a
    matmul with W[16, 8] at block level, written out and as the one op gelu_erf, and erf,
    erfc and gelu_erf as kernel-level ops."""
    g = mj.KernelGraph()
    X, W = g.new_input((4, 16), "float32"), g.new_input((16, 8), "float32")
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
    w = bg.new_input(W, imap=(-1, -1, -1), fmap=-1)
    h = bg.matmul(x, w)
    gelu = bg.mul(bg.mul_scalar(h, 0.5), bg.erfc(bg.mul_scalar(h, -INV_SQRT2)))
    for t in (bg.erf(x), bg.erfc(x), gelu, bg.gelu_erf(h)):
        bg.new_output(t, omap=(0, -1, -1))
    outs = list(g.customized([X, W], bg))
    for t in [*outs, g.erf(X), g.erfc(X), g.gelu_erf(X)]:
        g.mark_output(t)
    return g


def erf_xla(x, w):
    h = jnp.matmul(x, w, precision="highest")
    return (
        jax.lax.erf(x),
        jax.lax.erfc(x),
        jax.nn.gelu(h, approximate=False),
        jax.nn.gelu(h, approximate=False),  # the one op gelu_erf
        jax.lax.erf(x),
        jax.lax.erfc(x),
        jax.nn.gelu(x, approximate=False),
    )


def erf_inputs(rng):
    """The special values in rows 0-1, standard-normal rows 2-3 (scaled up in the second set);
    W spreads a NaN or inf of X over its row of the matmul."""
    a = rng.standard_normal((4, 16))
    a[:2] = special_rows()
    w = rng.standard_normal((16, 8))
    b = rng.standard_normal((4, 16)) * 3.0
    b[0] = 0.0
    b[1, :] *= 1e4
    return [[a, w], [b, w]]


def test_the_interpreter_is_the_c_library_erf_in_float64():
    g = mj.KernelGraph()
    X = g.new_input((2, 16), "float32")
    g.mark_output(g.erf(X))
    g.mark_output(g.erfc(X))
    x = special_rows()
    erf_got, erfc_got = g.evaluate([x], dtype="float64")
    erf_want = np.vectorize(math.erf)(x)
    erfc_want = np.vectorize(math.erfc)(x)
    np.testing.assert_array_equal(np.isnan(erf_got), np.isnan(x))
    np.testing.assert_array_equal(np.isnan(erfc_got), np.isnan(x))
    np.testing.assert_allclose(erf_got, erf_want, rtol=1e-15, atol=0)
    np.testing.assert_allclose(erfc_got, erfc_want, rtol=1e-15, atol=0)
    flat = erf_got.ravel()
    # the values lax.erf has at the special points
    assert flat[SPECIAL.index(INF)] == 1.0 and flat[SPECIAL.index(-INF)] == -1.0
    assert flat[SPECIAL.index(0.0)] == 0.0 and math.copysign(1, flat[1]) == -1.0  # erf(-0)
    assert flat[SPECIAL.index(1e30)] == 1.0 and flat[SPECIAL.index(-1e30)] == -1.0
    assert 0 < flat[SPECIAL.index(1e-40)] < 2e-40  # 2/√π · x, not flushed
    e = erfc_got.ravel()
    assert e[SPECIAL.index(INF)] == 0.0 and e[SPECIAL.index(-INF)] == 2.0
    assert 4e-37 < e[SPECIAL.index(9.0)] < 4.2e-37  # the tail 1 - erf(9) would lose


def test_cpu_kernels_and_interpreter_match_xla(rng):
    graph = erf_graph()
    compiled = jax.jit(mj.compile(graph))
    with np.errstate(all="ignore"):
        for k, inputs in enumerate(erf_inputs(rng)):
            want = xla_outputs(erf_xla, inputs)
            got = compiled(*[jnp.asarray(x, jnp.float32) for x in inputs])
            interpreted = graph.evaluate(inputs)
            for i, w in enumerate(want):
                assert_like_xla(got[i], w, f"erf set {k} output {i}, CPU kernel")
                assert_like_xla(interpreted[i], w, f"erf set {k} output {i}, interpreter")


def test_the_cpu_kernel_keeps_erfc_tail_and_signed_zero():
    """erfc's tail and erf(-0) = -0 in the generated kernel itself, not only through XLA."""
    graph = erf_graph()
    compiled = jax.jit(mj.compile(graph))
    x = np.zeros((4, 16), np.float32)
    x[:2] = special_rows()
    w = np.zeros((16, 8), np.float32)
    erf_k, erfc_k = (np.asarray(o).ravel()[:32] for o in compiled(x, w)[:2])
    assert math.copysign(1, erf_k[1]) == -1.0
    assert 3.9e-37 < erfc_k[SPECIAL.index(9.0)] < 4.3e-37


def test_the_cpu_kernels_erf_is_within_a_few_ulps_of_the_c_library():
    """The generated kernel's own erf and erfc (vectorized polynomials, not libm's) over
    [-12, 12] in steps of 2e-4, against the C library's double erf rounded to float32: within
    3 ulps for erf, 10 for erfc (whose 1 - erf near |x| = 1 cancels), down to erfc's last
    normal values."""
    g = mj.KernelGraph()
    X = g.new_input((96, 1250), "float32")
    bg = mj.BlockGraph(grid=(8, 1, 1), forloop_range=1)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
    bg.new_output(bg.erf(x), omap=(0, -1, -1))
    bg.new_output(bg.erfc(x), omap=(0, -1, -1))
    for t in g.customized([X], bg):
        g.mark_output(t)
    x = np.linspace(-12, 12, 96 * 1250, dtype=np.float32).reshape(96, 1250)
    erf_k, erfc_k = (np.asarray(o, np.float64) for o in jax.jit(mj.compile(g))(x))
    x64 = x.astype(np.float64)
    for got, fn, ulps, what in (
        (erf_k, math.erf, 3, "erf"),
        (erfc_k, math.erfc, 10, "erfc"),
    ):
        want = np.vectorize(fn)(x64)
        normal = np.abs(want) > float(np.finfo(np.float32).tiny)
        ulp = np.spacing(np.abs(want[normal]).astype(np.float32)).astype(np.float64)
        worst = np.max(np.abs(got[normal] - want[normal]) / ulp)
        assert worst <= ulps, f"{what}: {worst:.1f} ulps"


@pytest.mark.usefixtures("cuda_include")
def test_cuda_kernels_compile_and_match_xla_emulated(nvcc, tmp_path, rng):
    graph = erf_graph()
    kernels = kernels_of(graph)
    # sm_80 only: erff / erfcf are the same calls for every architecture, and nvcc is slow
    toolchain.check_cuda_compiles(["\n".join(kernels.values())], ARCHS[:1], jobs=1)
    library = build_emulation("\n".join(kernels.values()), tmp_path)
    (op,) = [op for op in graph.ops if op.kind == "customized"]
    with np.errstate(all="ignore"):
        for k, inputs in enumerate(erf_inputs(rng)):
            want = xla_outputs(erf_xla, inputs)
            got = run_kernel(library, op, [np.asarray(x, np.float32) for x in inputs])
            for i, w in enumerate(want[:3]):  # the customized op's outputs
                assert_like_xla(got[i], w, f"erf set {k} output {i}, CUDA emulated")

"""select(x, mask; c) as jnp.where(mask != 0, x, c) has it: x where the mask is nonzero
(NaN counts as nonzero, as a NaN converts to True), the fill c elsewhere, and a NaN or inf of
x under a 0 of the mask never reaches the result. Run after a matmul and inside a masked,
stabilized softmax at block level (fully masked rows give uniform weights, as jax.jit), and
as a kernel-level op.

Each graph runs as generated CPU kernels (`mj.compile`), as the float64 interpreter and, where
the CUDA toolkit is installed, as generated CUDA kernels (one nvcc compile, and the host
emulation of tests/cuda_host_emulation.h).
"""

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

FILL = float(np.finfo(np.float32).min)


def masked_softmax(g, s, m):
    t = g.select(s, m, FILL)
    e = g.exp(g.sub(t, g.reduce(t, -1, "max")))
    return g.div(e, g.reduce(e, -1, "sum"))


def select_graph():
    """X[4, 16], W[16, 8], M[4, 8]: select after a matmul and a masked softmax of the product
    at block level (blocks of two rows, the mask tiled like the product), and select as a
    kernel-level op with a fill of -1e9."""
    g = mj.KernelGraph()
    X, W = g.new_input((4, 16), "float32"), g.new_input((16, 8), "float32")
    M = g.new_input((4, 8), "float32")
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
    w = bg.new_input(W, imap=(-1, -1, -1), fmap=-1)
    m = bg.new_input(M, imap=(0, -1, -1), fmap=-1)
    h = bg.matmul(x, w)
    for t in (bg.select(h, m, FILL), masked_softmax(bg, h, m)):
        bg.new_output(t, omap=(0, -1, -1))
    outs = list(g.customized([X, W, M], bg))
    for t in [*outs, g.select(g.matmul(X, W), M, -1e9)]:
        g.mark_output(t)
    return g


def select_xla(x, w, m):
    h = jnp.matmul(x, w, precision="highest")
    s = jnp.where(m != 0, h, FILL)
    return s, jax.nn.softmax(s, axis=-1), jnp.where(m != 0, h, np.float32(-1e9))


def select_inputs(rng):
    """A NaN, an inf and a -inf in X (each spreads over its row of the product) whose rows the
    mask covers with 0 where it must, a fully masked row, a NaN mask element, and huge logits
    in a second set."""
    x = rng.standard_normal((4, 16))
    w = rng.standard_normal((16, 8))
    m = (rng.random((4, 8)) < 0.6).astype(np.float64)
    m[3, :] = 0.0  # fully masked: uniform weights
    x[3, 0] = np.nan  # the product's row 3 is NaN, all under the mask
    m[2, 5] = np.nan  # counts as true
    big = rng.standard_normal((4, 16)) * 1e3
    big[1, 2] = np.inf
    m_big = np.ones((4, 8))
    m_big[1, :] = 0.0  # row 1 of the product is ±inf or NaN, all masked
    m_big[0, ::2] = 0.0
    return [[x, w, m], [big, w, m_big]]


def test_the_interpreter_is_jnp_where(rng):
    graph = select_graph()
    with np.errstate(all="ignore"):
        for k, inputs in enumerate(select_inputs(rng)):
            want = xla_outputs(select_xla, inputs)
            got = graph.evaluate(inputs)
            for i, w in enumerate(want):
                assert_like_xla(got[i], w, f"select set {k} output {i}, interpreter")
            assert np.isfinite(got[1]).all() and np.isfinite(got[2]).all()


def test_cpu_kernels_match_xla(rng):
    graph = select_graph()
    compiled = jax.jit(mj.compile(graph))
    with np.errstate(all="ignore"):
        for k, inputs in enumerate(select_inputs(rng)):
            want = xla_outputs(select_xla, inputs)
            got = compiled(*[jnp.asarray(x, jnp.float32) for x in inputs])
            for i, w in enumerate(want):
                assert_like_xla(got[i], w, f"select set {k} output {i}, CPU kernel")
            assert np.isfinite(np.asarray(got[1])).all()


@pytest.mark.usefixtures("cuda_include")
def test_cuda_kernels_compile_and_match_xla_emulated(nvcc, tmp_path, rng):
    graph = select_graph()
    kernels = kernels_of(graph)
    toolchain.check_cuda_compiles(["\n".join(kernels.values())], ARCHS[:1], jobs=1)
    library = build_emulation("\n".join(kernels.values()), tmp_path)
    (op,) = [op for op in graph.ops if op.kind == "customized"]
    with np.errstate(all="ignore"):
        for k, inputs in enumerate(select_inputs(rng)):
            want = xla_outputs(select_xla, inputs)
            got = run_kernel(library, op, [np.asarray(x, np.float32) for x in inputs])
            for i, w in enumerate(want[:2]):  # the customized op's outputs
                assert_like_xla(got[i], w, f"select set {k} output {i}, CUDA emulated")

"""NaN and infinities as XLA has them (docs/ir-semantics.md, "NaN and infinities"): a NaN
inside a block-level max reduction, an accum_max_last (the online softmax's running max) or
before a relu is propagated, never dropped; a softmax row masked with -inf everywhere is NaN
as in `jax.nn.softmax`, and one masked only over a whole chunk of the loop (or a whole KV slice
of a split softmax) is finite, as in XLA.

Each graph runs as generated CPU kernels (`mj.compile`), as the interpreter (float64) and,
where the CUDA toolkit is installed, as generated CUDA kernels compiled by nvcc and run in the
host emulation of tests/cuda_host_emulation.h; every result must have XLA's NaN and inf
positions and XLA's finite values.
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

import mirage_jax as mj
from mirage_jax.runtime import toolchain

NAN, INF = np.nan, np.inf
F32_MIN = float(np.finfo(np.float32).min)


# ------------------------------------------------------------------------------ graphs


def reductions_graph():
    """Block-level max over the last dim (a vectorized row max) and over the first dim (an
    element-wise max), relu of the input and relu after a matmul: X[4, 16], W[16, 8], blocks
    of two rows."""
    g = mj.KernelGraph()
    X, W = g.new_input((4, 16), "float32"), g.new_input((16, 8), "float32")
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
    w = bg.new_input(W, imap=(-1, -1, -1), fmap=-1)
    for t in (
        bg.reduce(x, -1, "max"),
        bg.reduce(x, 0, "max"),
        bg.relu(x),
        bg.relu(bg.matmul(x, w)),
    ):
        bg.new_output(t, omap=(0, -1, -1))
    for t in g.customized([X, W], bg):
        g.mark_output(t)
    return g


def reductions_xla(x, w):
    return (
        jnp.max(x, -1, keepdims=True),
        jnp.max(x.reshape(2, 2, 16), axis=1),
        jax.nn.relu(x),
        jax.nn.relu(jnp.matmul(x, w, precision="highest")),
    )


def long_row_max_graph():
    """Block-level max over rows of 83 (four partial vectors of 16, one more and 3 left over,
    folded into one lane at the end): X[88, 83], blocks of eight rows."""
    g = mj.KernelGraph()
    X = g.new_input((88, 83), "float32")
    bg = mj.BlockGraph(grid=(11, 1, 1), forloop_range=1)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
    bg.new_output(bg.reduce(x, -1, "max"), omap=(0, -1, -1))
    (y,) = g.customized([X], bg)
    g.mark_output(y)
    return g


def long_row_max_xla(x):
    # XLA's own max drops the NaN of a row this long (jaxlib 0.10 on CPU; it keeps it in rows
    # of 16): the IR's max propagates it (docs/ir-semantics.md), as numpy's does.
    return (jnp.where(jnp.isnan(x).any(-1, keepdims=True), jnp.nan, jnp.max(x, -1, keepdims=True)),)


def online_softmax_graph():
    """The online softmax over scores S[4, 16] walked 4 columns at a time: accum_max_last(S)
    and softmax(S) @ V from accum_exp_matmul / accum_exp_sum_last."""
    g = mj.KernelGraph()
    S, V = g.new_input((4, 16), "float32"), g.new_input((16, 4), "float32")
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=4)
    s = bg.new_input(S, imap=(0, -1, -1), fmap=1)
    v = bg.new_input(V, imap=(-1, -1, -1), fmap=0)
    bg.new_output(bg.accum_max_last(s), omap=(0, -1, -1))
    bg.new_output(bg.div(bg.accum_exp_matmul(s, v), bg.accum_exp_sum_last(s)), omap=(0, -1, -1))
    for t in g.customized([S, V], bg):
        g.mark_output(t)
    return g


def online_softmax_xla(s, v):
    return (
        jnp.max(s, -1, keepdims=True),
        jnp.matmul(jax.nn.softmax(s, axis=-1), v, precision="highest"),
    )


def split_softmax_graph():
    """softmax(S) @ V split over two KV slices (each walked in 2 steps), as the paper's
    split-KV μGraphs: per-slice online softmax with its max stored, M = max of the slice
    maxima, a combine kernel that rescales by exp(m_b - M)."""
    g = mj.KernelGraph()
    S, V = g.new_input((4, 16), "float32"), g.new_input((16, 4), "float32")
    k1 = mj.BlockGraph(grid=(2, 2, 1), forloop_range=2)
    s = k1.new_input(S, imap=(0, 1, -1), fmap=1)
    v = k1.new_input(V, imap=(-1, 0, -1), fmap=0)
    k1.new_output(k1.accum_exp_matmul(s, v), omap=(0, 1, -1))
    k1.new_output(k1.accum_exp_sum_last(s), omap=(0, 1, -1))
    k1.new_output(k1.accum_max_last(s), omap=(0, 1, -1))
    ev, sums, maxima = g.customized([S, V], k1)
    top = g.reduce(maxima, 1, "max")
    k2 = mj.BlockGraph(grid=(2, 1, 1), forloop_range=2)
    e = k2.new_input(ev, imap=(0, -1, -1), fmap=1)
    row_sums = k2.new_input(sums, imap=(0, -1, -1), fmap=1)
    m = k2.new_input(maxima, imap=(0, -1, -1), fmap=1)
    mx = k2.new_input(top, imap=(0, -1, -1), fmap=-1)
    w = k2.exp(k2.sub(m, mx))
    k2.new_output(
        k2.div(k2.accum_sum(k2.mul(w, e)), k2.accum_sum(k2.mul(w, row_sums))),
        omap=(0, -1, -1),
    )
    (y,) = g.customized([ev, sums, maxima, top], k2)
    g.mark_output(y)
    return g


def split_softmax_xla(s, v):
    return (jnp.matmul(jax.nn.softmax(s, axis=-1), v, precision="highest"),)


# ------------------------------------------------------------------------------ inputs


def reductions_inputs(rng):
    x = rng.standard_normal((4, 16))
    x[0, 0] = NAN  # first in its row (and its block's first row)
    x[1, 15] = NAN  # last in its row
    x[2, 7] = NAN  # in the middle, the second block
    x[3, :] = -INF  # a row with no finite value
    x[3, 3] = INF
    x[2, 9] = -0.0
    w = rng.standard_normal((16, 8))
    return [x, w]


def long_row_inputs(rng):
    """Row r < 83 holds its NaN at position r: every lane of every partial and the tail."""
    x = rng.standard_normal((88, 83))
    for r in range(83):
        x[r, r] = NAN
    x[83, :] = -INF
    x[84, :] = -INF
    x[84, 70] = INF
    x[85, :] = F32_MIN
    x[86, :] = -0.0
    return [x]


def score_inputs(rng):
    """Rows built to break a softmax, in two sets of four rows each."""
    v = rng.standard_normal((16, 4))
    a = rng.standard_normal((4, 16))
    a[0, 5] = NAN  # NaN in the second loop chunk
    a[1, :] = -INF  # fully masked with -inf: NaN in XLA
    a[2, :8] = -INF  # the first two chunks (a whole KV slice) masked: finite in XLA
    a[3, :] = F32_MIN  # fully masked with finfo.min: uniform in XLA
    b = rng.standard_normal((4, 16))
    b[0, ::2] = -1e9  # half masked with -1e9
    b[1, :] = -1e10  # fully masked with -1e10
    b[2, 13] = INF  # +inf: NaN in XLA
    b[3, :] *= 1e4  # huge logits
    return [[a, v], [b, v]]


CASES = {
    "reductions": (
        reductions_graph,
        reductions_xla,
        lambda rng: [reductions_inputs(rng)],
    ),
    "long_row_max": (long_row_max_graph, long_row_max_xla, lambda rng: [long_row_inputs(rng)]),
    "online_softmax": (online_softmax_graph, online_softmax_xla, score_inputs),
    "split_softmax": (split_softmax_graph, split_softmax_xla, score_inputs),
}


def assert_like_xla(got, want, what):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, what
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN positions")
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg=f"{what}: +inf")
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want), err_msg=f"{what}: -inf")
    finite = np.isfinite(want)
    np.testing.assert_allclose(
        got[finite],
        want[finite],
        rtol=2e-5,
        atol=1e-6,
        err_msg=f"{what}: finite values",
    )


def xla_outputs(reference, inputs):
    return jax.jit(reference)(*[jnp.asarray(x, jnp.float32) for x in inputs])


# ------------------------------------------------------------------------------- tests


def test_the_inputs_hold_what_xla_propagates_and_what_it_keeps_finite(rng):
    """Guards the inputs: XLA gives NaN on the NaN, -inf-masked and +inf rows, and finite
    values on the finfo.min, -1e9, -1e10, chunk-masked and huge-logit rows."""
    (a, v), (b, _) = score_inputs(rng)
    (ya,) = split_softmax_xla(jnp.asarray(a, jnp.float32), jnp.asarray(v, jnp.float32))
    (yb,) = split_softmax_xla(jnp.asarray(b, jnp.float32), jnp.asarray(v, jnp.float32))
    assert [bool(np.isnan(r).all()) for r in np.asarray(ya)] == [
        True,
        True,
        False,
        False,
    ]
    assert [bool(np.isnan(r).all()) for r in np.asarray(yb)] == [
        False,
        False,
        True,
        False,
    ]
    assert np.isfinite(np.asarray(ya)[2:]).all() and np.isfinite(np.asarray(yb)[[0, 1, 3]]).all()


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpu_kernels_and_interpreter_match_xla(name, rng):
    build, reference, inputs_of = CASES[name]
    graph = build()
    compiled = jax.jit(mj.compile(graph))
    with np.errstate(all="ignore"):
        for k, inputs in enumerate(inputs_of(rng)):
            want = xla_outputs(reference, inputs)
            got = compiled(*[jnp.asarray(x, jnp.float32) for x in inputs])
            interpreted = graph.evaluate(inputs)
            for i, w in enumerate(want):
                assert_like_xla(got[i], w, f"{name} set {k} output {i}, CPU kernel")
                assert_like_xla(interpreted[i], w, f"{name} set {k} output {i}, interpreter")


@pytest.mark.usefixtures("nvcc")
def test_cuda_kernels_compile():
    kernels = {}
    for build, _, _ in CASES.values():
        kernels.update(kernels_of(build()))
    toolchain.check_cuda_compiles(["\n".join(kernels.values())], ARCHS, jobs=1)


def run_emulated(library, graph, inputs):
    """Customized ops emulated, predefined ones (the split form's reduce) in numpy."""
    values = {t.id: np.asarray(x, np.float32) for t, x in zip(graph.inputs, inputs)}
    for op in graph.ops:
        if op.kind == "customized":
            outs = run_kernel(library, op, [values[t.id] for t in op.inputs])
            values.update((t.id, out) for t, out in zip(op.outputs, outs))
        elif op.kind == "reduce":
            assert op.reduce_kind == "max"
            values[op.outputs[0].id] = np.max(values[op.inputs[0].id], axis=op.dim, keepdims=True)
    return [values[t.id] for t in graph.outputs]


@pytest.mark.usefixtures("cuda_include")
def test_cuda_kernels_match_xla_emulated(tmp_path, rng):
    graphs = {name: build() for name, (build, _, _) in CASES.items()}
    kernels = {}
    for graph in graphs.values():
        kernels.update(kernels_of(graph))
    library = build_emulation("\n".join(kernels.values()), tmp_path)
    with np.errstate(all="ignore"):
        for name, (_, reference, inputs_of) in CASES.items():
            for k, inputs in enumerate(inputs_of(rng)):
                want = xla_outputs(reference, inputs)
                got = run_emulated(library, graphs[name], inputs)
                for i, w in enumerate(want):
                    assert_like_xla(got[i], w, f"{name} set {k} output {i}, CUDA emulated")

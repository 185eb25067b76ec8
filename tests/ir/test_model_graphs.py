"""The hand-written μGraphs of model programs (mirage_jax.ir.model_graphs) at small shapes:
fused, reference and a numpy implementation written here agree under the interpreter, the
verifier accepts each pair both ways and rejects a fused graph with a wrong tile map, and the
compiled kernels agree with jax on inputs built to break them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (an autouse fixture)

import mirage_jax as mj
from mirage_jax.ir import model_graphs
from mirage_jax.ir.graph import BlockGraph, KernelGraph

EPS = 1e-6
# float_check.py's float32 tolerance, relative to each output's largest magnitude.
F32_TOL = 2.0**-13


def _layer_norm(x):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + EPS)


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _silu(x):
    return x / (1 + np.exp(-x))


NUMPY = {
    "layernorm_linear": lambda x, w: _layer_norm(x) @ w,
    "swiglu_down": lambda x, w1, w3, w2: (_silu(x @ w1) * (x @ w3)) @ w2,
    "masked_attention": lambda q, k, v, m: _softmax(q @ k / np.sqrt(q.shape[-1]) + m) @ v,
}


def test_every_program_has_a_numpy_reference():
    assert sorted(NUMPY) == sorted(model_graphs.PROGRAMS)


@pytest.fixture(params=sorted(model_graphs.PROGRAMS))
def program(request):
    return model_graphs.PROGRAMS[request.param]


def _shapes(kg):
    return [t.shape for t in kg.inputs]


def test_fused_reference_and_numpy_agree(program, rng):
    ref, fused = program.build(**program.small)
    assert _shapes(ref) == _shapes(fused)
    inputs = [rng.normal(size=s) for s in _shapes(ref)]
    expected = NUMPY[program.name](*inputs)
    for graph in (ref, fused):
        (got,) = graph.evaluate(inputs, dtype="float64")
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_verifier_accepts_both_directions(program):
    ref, fused = program.build(**program.small)
    forward = mj.verify_equivalent(ref, fused)
    assert forward, forward.reason
    backward = mj.verify_equivalent(fused, ref)
    assert backward, backward.reason


def _masked_attention_with_the_heads_mask():
    """masked_attention's fused graph with the mask's rows split by the head instead of the
    query tile (the small shapes have as many heads as query tiles, so the tiles fit): each
    block adds another block's mask."""
    small = model_graphs.PROGRAMS["masked_attention"].small
    assert small["heads"] == small["q_tiles"]
    ref, _ = model_graphs.masked_attention(**small)
    fused = KernelGraph()
    Q, K, V, M = (fused.new_input(t.shape, t.dtype) for t in ref.inputs)
    steps = small["kv_len"] // small["kv_tile"]
    bg = BlockGraph(grid=(small["heads"], small["q_tiles"], 1), forloop_range=steps)
    q = bg.new_input(Q, imap=(0, 1, -1), fmap=-1)
    k = bg.new_input(K, imap=(0, -1, -1), fmap=2)
    v = bg.new_input(V, imap=(0, -1, -1), fmap=1)
    m = bg.new_input(M, imap=(1, -1, -1), fmap=2)
    s = bg.add(bg.mul_scalar(bg.matmul(q, k), 1.0 / np.sqrt(small["head_dim"])), m)
    bg.new_output(bg.div(bg.accum_exp_matmul(s, v), bg.accum_exp_sum_last(s)), omap=(0, 1, -1))
    (Y,) = fused.customized([Q, K, V, M], bg)
    fused.mark_output(Y)
    return ref, fused


def _layernorm_linear_without_centering():
    """layernorm_linear's fused graph dividing the uncentered matmul: an RMSNorm, not a
    LayerNorm."""
    small = model_graphs.PROGRAMS["layernorm_linear"].small
    ref, _ = model_graphs.layernorm_linear(**small)
    fused = KernelGraph()
    X, W = (fused.new_input(t.shape, t.dtype) for t in ref.inputs)
    bg = BlockGraph(
        grid=(small["out_features"] // small["col_tile"], 1, 1),
        forloop_range=small["hidden"] // small["k_tile"],
    )
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    bg.new_output(
        bg.div(bg.accum_sum(bg.matmul(x, w)), bg.accum_rms_last(x, EPS)), omap=(1, -1, -1)
    )
    (Y,) = fused.customized([X, W], bg)
    fused.mark_output(Y)
    return ref, fused


@pytest.mark.parametrize(
    "wrong", [_masked_attention_with_the_heads_mask, _layernorm_linear_without_centering]
)
def test_verifier_rejects_a_wrong_form(wrong):
    ref, fused = wrong()
    assert not mj.verify_equivalent(ref, fused)


def _adversarial_inputs(name, shapes, rng):
    """Standard normal inputs with the rows that break each kernel planted in them."""
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if name == "layernorm_linear":
        x = xs[0]
        x[0] = 1e4 + 1e-2 * x[0]  # a large mean over a tiny spread
        x[1] = 3.0  # a constant row: variance exactly 0
    elif name == "masked_attention":
        q, _, _, m = xs
        q *= 30.0  # logits in the thousands: exp overflows without the max
        m[:] = 0.0
        m[0, 0, :] = np.finfo(np.float32).min  # a row masked everywhere: uniform weights
        m[0, 1, 1:] = -1e9  # a row that sees one key only
        m[0, 2, ::2] = -np.inf  # half the keys masked with -inf
    elif name == "swiglu_down":
        xs[0][0] = 0.0  # silu(0) * 0
        xs[0][1] *= 50.0  # silu far into both tails
    return xs


def _jax_reference(name):
    if name == "layernorm_linear":
        return lambda x, w: (
            (
                (x - x.mean(-1, keepdims=True))
                / jnp.sqrt(jnp.mean((x - x.mean(-1, keepdims=True)) ** 2, -1, keepdims=True) + EPS)
            )
            @ w
        )
    if name == "swiglu_down":
        return lambda x, w1, w3, w2: (jax.nn.silu(x @ w1) * (x @ w3)) @ w2
    return lambda q, k, v, m: jax.nn.softmax(q @ k / np.sqrt(q.shape[-1]) + m, axis=-1) @ v


def test_compiled_kernels_agree_with_jax_on_adversarial_rows(program, rng):
    _, fused = program.build(**program.small)
    assert any(op.kind == "customized" for op in fused.ops)
    inputs = _adversarial_inputs(program.name, _shapes(fused), rng)
    (got,) = jax.jit(mj.compile(fused))(*inputs)
    want = np.asarray(jax.jit(_jax_reference(program.name))(*inputs))
    got = np.asarray(got)
    assert np.isfinite(want).all()
    scale = np.abs(want).max(axis=-1, keepdims=True) + np.finfo(np.float32).tiny
    assert (np.abs(got - want) / scale).max() <= F32_TOL

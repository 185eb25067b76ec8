"""The adversarial float checks: each pattern catches a hand-built μGraph that is equal to
its reference in algebra (so the finite-field verifier cannot see the fault) and passes on
standard-normal data, while the correct fused forms pass every pattern, in float32 and the
16-bit dtypes."""

import math

import jax
import numpy as np
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    random_inputs,
    session_kernel_cache,
)
from wrong_graphs import split_kv_without_maxima

import mirage_jax as mj
from mirage_jax.ir.graph import BlockGraph, KernelGraph
from mirage_jax.ir.paper_graphs import (
    PROGRAMS,
    flash_attention_online,
    gated_mlp,
    rmsnorm_linear,
)
from mirage_jax.superopt import float_check as fc

HEADS, Q_LEN, KV_LEN, HEAD_DIM = 2, 8, 16, 4
SCALE = 1.0 / math.sqrt(HEAD_DIM)


def suite_for(ref):
    inputs = random_inputs(ref, seed=0)
    return fc.AdversarialSuite(ref, jax.jit(mj.compile(ref)), inputs)


def run(graph):
    return jax.jit(mj.compile(graph))


def passes_on_normal_data(ref, candidate):
    inputs = random_inputs(ref, seed=0)
    want = run(ref)(*inputs)
    return fc.check_outputs(run(candidate)(*inputs), want, [t.dtype for t in ref.inputs])


# -- hand-built graphs ------------------------------------------------------------------


def masked_attention(dtype="float32", wrong=False):
    """softmax(scale·Q·K + M)·V, and its one-kernel online-softmax form. wrong: the kernel
    stabilizes with the max of the unmasked scores, exp(s + m − max s): equal in algebra, but
    a fully masked row underflows to 0/0."""
    ref = KernelGraph()
    Q = ref.new_input((HEADS, Q_LEN, HEAD_DIM), dtype)
    K = ref.new_input((HEADS, HEAD_DIM, KV_LEN), dtype)
    V = ref.new_input((HEADS, KV_LEN, HEAD_DIM), dtype)
    M = ref.new_input((HEADS, Q_LEN, KV_LEN), dtype)
    s = ref.add(ref.mul_scalar(ref.matmul(Q, K), SCALE), M)
    e = ref.exp(ref.sub(s, ref.reduce(s, -1, "max")))
    ref.mark_output(ref.matmul(ref.div(e, ref.reduce(e, -1, "sum")), V))

    fused = KernelGraph()
    Q = fused.new_input((HEADS, Q_LEN, HEAD_DIM), dtype)
    K = fused.new_input((HEADS, HEAD_DIM, KV_LEN), dtype)
    V = fused.new_input((HEADS, KV_LEN, HEAD_DIM), dtype)
    M = fused.new_input((HEADS, Q_LEN, KV_LEN), dtype)
    if wrong:
        bg = BlockGraph(grid=(HEADS, 2, 1), forloop_range=1)
        q = bg.new_input(Q, imap=(0, 1, -1), fmap=-1)
        k = bg.new_input(K, imap=(0, -1, -1), fmap=-1)
        v = bg.new_input(V, imap=(0, -1, -1), fmap=-1)
        m = bg.new_input(M, imap=(0, 1, -1), fmap=-1)
        raw = bg.mul_scalar(bg.matmul(q, k), SCALE)
        e = bg.exp(bg.sub(bg.add(raw, m), bg.reduce(raw, -1, "max")))
        out = bg.div(bg.matmul(e, v), bg.reduce(e, -1, "sum"))
    else:
        bg = BlockGraph(grid=(HEADS, 2, 1), forloop_range=4)
        q = bg.new_input(Q, imap=(0, 1, -1), fmap=-1)
        k = bg.new_input(K, imap=(0, -1, -1), fmap=2)
        v = bg.new_input(V, imap=(0, -1, -1), fmap=1)
        m = bg.new_input(M, imap=(0, 1, -1), fmap=2)
        s = bg.add(bg.mul_scalar(bg.matmul(q, k), SCALE), m)
        out = bg.div(bg.accum_exp_matmul(s, v), bg.accum_exp_sum_last(s))
    bg.new_output(out, omap=(0, 1, -1))
    (Y,) = fused.customized([Q, K, V, M], bg)
    fused.mark_output(Y)
    return ref, fused


def linear_and_cancelling_copy(dtype="float32"):
    """X@W, and a kernel computing 2·(X@W) − X@W: equal, but inf − inf is NaN where X@W is
    infinite (a kernel that mishandles infinities)."""
    ref = KernelGraph()
    X = ref.new_input((4, 16), dtype)
    W = ref.new_input((16, 8), dtype)
    ref.mark_output(ref.matmul(X, W))
    fused = KernelGraph()
    X = fused.new_input((4, 16), dtype)
    W = fused.new_input((16, 8), dtype)
    bg = BlockGraph(grid=(2, 1, 1), forloop_range=4)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    acc = bg.accum_sum(bg.matmul(x, w))
    bg.new_output(bg.sub(bg.mul_scalar(acc, 2.0), acc), omap=(1, -1, -1))
    (Y,) = fused.customized([X, W], bg)
    fused.mark_output(Y)
    return ref, fused


def rmsnorm_linear_without_eps(dtype="float32"):
    """rms_norm(X)@W with eps 1e-6, and the fused kernel dividing by sqrt(mean(x²)) without
    the eps: within 1e-6 on normal data, 0/0 on a zero row."""
    ref, _ = rmsnorm_linear(batch=4, hidden=16, out_features=8, col_tile=4, k_tile=4)
    fused = KernelGraph()
    X = fused.new_input((4, 16), dtype)
    G = fused.new_input((16,), dtype)
    W = fused.new_input((16, 8), dtype)
    bg = BlockGraph(grid=(2, 1, 1), forloop_range=4)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    g = bg.new_input(G, imap=(-1, -1, -1), fmap=0)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    acc = bg.accum_sum(bg.matmul(bg.mul(x, g), w))
    bg.new_output(bg.div(acc, bg.sqrt(bg.accum_mean_last(bg.square(x)))), omap=(1, -1, -1))
    (Y,) = fused.customized([X, G, W], bg)
    fused.mark_output(Y)
    return ref, fused


# -- every wrong graph is caught, by the pattern built for it ------------------------------


def where_masked_softmax_with_a_wrong_fill():
    """softmax(where(M, S, finfo.min)) and the same with a fill of +1e4: equal wherever the
    mask is nonzero, so on standard-normal masks (never 0); far apart on a 0/1 mask."""
    graphs = []
    for fill in (float(np.finfo(np.float32).min), 1e4):
        g = KernelGraph()
        s, m = g.new_input((8, 16), "float32"), g.new_input((8, 16), "float32")
        t = g.select(s, m, fill)
        e = g.exp(g.sub(t, g.reduce(t, -1, "max")))
        g.mark_output(g.div(e, g.reduce(e, -1, "sum")))
        graphs.append(g)
    return tuple(graphs)


WRONG = {
    "select with a wrong fill": (where_masked_softmax_with_a_wrong_fill, "select mask of 0/1"),
    "unstabilized softmax (split-KV partials without maxima)": (
        split_kv_without_maxima,
        "logits ×",
    ),
    "mask added after the stabilizer's max": (
        lambda: masked_attention(wrong=True),
        "additive mask finfo.min",
    ),
    "mask added after the stabilizer's max, float16": (
        lambda: masked_attention("float16", wrong=True),
        "additive mask finfo.min",
    ),
    "inf − inf in a rewritten sum": (linear_and_cancelling_copy, "NaN, +inf and -inf in input 0"),
    "eps dropped from a norm": (rmsnorm_linear_without_eps, "zeros in the first and last rows"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_wrong_graph_passes_normal_data_and_fails_its_adversarial_pattern(case):
    build, pattern = WRONG[case]
    ref, wrong = build()
    assert passes_on_normal_data(ref, wrong)  # the old check's data shows nothing
    verdict, name = suite_for(ref).check(run(wrong))
    assert not verdict, case
    assert name.startswith(pattern), (name, verdict.detail)
    assert "output 0:" in verdict.detail


@pytest.mark.parametrize("value", ["finfo.min", "-1e9", "-1e10"])
def test_each_finite_mask_value_alone_catches_a_mask_added_after_the_max(value):
    ref, wrong = masked_attention(wrong=True)
    suite = suite_for(ref)
    suite.patterns = [p for p in suite.patterns if p.name.startswith(f"additive mask {value} ")]
    assert len(suite.patterns) == 1 and "on input 3" in suite.patterns[0].name
    verdict, _ = suite.check(run(wrong))
    assert not verdict and "non-finite where XLA differs" in verdict.detail, verdict


def test_the_roles_of_inputs_come_from_the_graph():
    ref, _ = masked_attention()
    names = [p.name for p in fc.patterns(ref)]
    assert names[0].startswith("logits ×16384 (inputs [0, 1] ×128)")  # Q·K: degree 2
    assert sum(n.startswith("additive mask") for n in names) == len(fc.MASK_VALUES)
    assert all(n.endswith("on input 3") for n in names if n.startswith("additive mask"))
    ref, _ = rmsnorm_linear(batch=4, hidden=16, out_features=8, col_tile=4, k_tile=4)
    names = [p.name for p in fc.patterns(ref)]
    assert not any(n.startswith(("logits", "additive mask")) for n in names)  # no exp
    assert len(names) <= fc.MAX_PATTERNS


def test_padding_masks_cover_full_left_and_right_padding():
    mask = fc._padding_mask(-1e9, 0)(np.zeros((8, 6), np.float32))
    masked = mask == np.float32(-1e9)
    assert masked[0].all() and masked[4].all()  # fully masked rows
    assert masked[1, 0] and not masked[1, -1]  # left padding
    assert masked[2, -1] and not masked[2, 0]  # right padding
    assert not masked[3].any()
    assert all(not masked[r].all() for r in (1, 2, 5, 6))  # each padded row keeps a key


# -- the correct fused forms pass every pattern ----------------------------------------------

RIGHT = {
    "rmsnorm_linear": lambda dtype: rmsnorm_linear(
        batch=4, hidden=16, out_features=8, col_tile=4, k_tile=4, dtype=dtype
    ),
    "gated_mlp": lambda dtype: gated_mlp(
        batch=4, hidden=16, intermediate=8, col_tile=4, k_tile=4, dtype=dtype
    ),
    "flash_attention_online": lambda dtype: flash_attention_online(
        **PROGRAMS["flash_attention_online"].small, dtype=dtype
    ),
    "masked_online_attention": lambda dtype: masked_attention(dtype),
}


# Every program in float32; each 16-bit type on attention with a mask and on one MLP form
# (a kernel compiles in seconds, so not every pair).
PAIRS = [(p, "float32") for p in sorted(RIGHT)] + [
    ("masked_online_attention", "bfloat16"),
    ("gated_mlp", "bfloat16"),
    ("masked_online_attention", "float16"),
    ("rmsnorm_linear", "float16"),
]


@pytest.mark.parametrize("program, dtype", PAIRS)
def test_the_correct_fused_forms_pass_every_pattern(program, dtype):
    ref, fused = RIGHT[program](dtype)
    suite = suite_for(ref)
    verdict, name = suite.check(run(fused))
    assert verdict, f"{name}: {verdict.detail}"
    assert len(suite.patterns) >= 4


def test_the_logits_tolerance_grows_with_the_logits_only():
    want = np.array([[1.0, 0.0]], np.float32)
    got = want + np.float32(0.01)
    assert not fc.check_outputs([got], [want], ["float32"])
    assert fc.check_outputs([got], [want], ["float32"], growth=2.0**13)
    # non-finite elements are held exactly whatever the growth
    nan = np.array([[np.nan, 0.0]], np.float32)
    assert not fc.check_outputs([want], [nan], ["float32"], growth=2.0**13)
    assert not fc.check_outputs([nan], [want], ["float32"], growth=2.0**13)
    signs = np.array([[np.inf, 0.0]], np.float32)
    verdict = fc.check_outputs([-signs], [signs], ["float32"], growth=2.0**13)
    assert not verdict and "first at [0, 0]: got -inf, XLA inf" in verdict.detail

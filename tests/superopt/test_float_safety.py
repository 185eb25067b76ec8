"""Numerical safety is part of equivalence (docs/ir-semantics.md, "Numerical safety").

`verify_equivalent` rejects a softmax without its max (one kernel or block level) and the
split-KV μGraph whose partials take exp without a max, and accepts the stabilized forms: the
max-subtracted softmax, the online softmax and the split form that stores per-slice maxima
and rescales in the combine. `mj.search` never returns an unstabilized candidate: every one
is checked in float64 on inputs built to break it (logits scaled to 1e4, rows masked with
finfo.min, -1e9 and -inf), where it must be finite wherever the reference is.
"""

import numpy as np
import pytest

import mirage_jax as mj
from mirage_jax.ir import paper_graphs

# --------------------------------------------------------------------------- graphs


def softmax_graph(rows=4, cols=16, *, stabilized=True, block=False):
    """softmax over the last dim of x[rows, cols]; block=True: one block graph whose blocks
    own two whole rows each."""
    g = mj.KernelGraph()
    x = g.new_input((rows, cols), "float32")
    if block:
        bg = mj.BlockGraph(grid=(rows // 2, 1, 1), forloop_range=1)
        t = bg.new_input(x, imap=(0, -1, -1), fmap=-1)
        if stabilized:
            t = bg.sub(t, bg.reduce(t, -1, "max"))
        e = bg.exp(t)
        bg.new_output(bg.div(e, bg.reduce(e, -1, "sum")), omap=(0, -1, -1))
        (y,) = g.customized([x], bg)
    else:
        t = g.sub(x, g.reduce(x, -1, "max")) if stabilized else x
        e = g.exp(t)
        y = g.div(e, g.reduce(e, -1, "sum"))
    g.mark_output(y)
    return g


def unstabilized_split_kv(
    heads=2, q_len=8, kv_len=16, head_dim=4, kv_splits=2, q_tiles=2, forloop=2
):
    """The split-KV μGraph as the Mirage paper writes it (and this repository did): partials
    of exp(scale·Q·K) with no max, combined by plain sums."""
    scale = 1.0 / np.sqrt(head_dim)
    g = mj.KernelGraph()
    Q = g.new_input((heads, q_len, head_dim), "float32")
    K = g.new_input((heads, head_dim, kv_len), "float32")
    V = g.new_input((heads, kv_len, head_dim), "float32")
    bg = mj.BlockGraph(grid=(heads, kv_splits, q_tiles), forloop_range=forloop)
    q = bg.new_input(Q, imap=(0, -1, 1), fmap=-1)
    k = bg.new_input(K, imap=(0, 2, -1), fmap=2)
    v = bg.new_input(V, imap=(0, 1, -1), fmap=1)
    e = bg.exp(bg.mul_scalar(bg.matmul(q, k), scale))
    bg.new_output(bg.accum_sum(bg.matmul(e, v)), omap=(0, 2, 1))
    bg.new_output(bg.accum_sum_last(e), omap=(0, 2, 1))
    ev, sums = g.customized([Q, K, V], bg)
    cb = mj.BlockGraph(grid=(heads, q_tiles, 1), forloop_range=kv_splits)
    a = cb.new_input(ev, imap=(0, 1, -1), fmap=2)
    b = cb.new_input(sums, imap=(0, 1, -1), fmap=2)
    cb.new_output(cb.div(cb.accum_sum(a), cb.accum_sum_last(b)), omap=(0, 1, -1))
    (y,) = g.customized([ev, sums], cb)
    g.mark_output(y)
    return g


def gqa_small():
    program = paper_graphs.PROGRAMS["gqa_prefill"]
    return program.build(**program.small)


# ------------------------------------------------------------------ float64 evidence


def adversarial_inputs(graph, rng):
    """Input sets built to break an unstabilized softmax: huge logits, and the first input's
    rows masked (every entry) with finfo.min, -1e9 and -inf."""
    base = [rng.standard_normal(t.shape) for t in graph.inputs]
    sets = [base, [x * 1e4 for x in base]]
    for fill in (np.finfo(np.float32).min, -1e9, -np.inf):
        masked = [x.copy() for x in base]
        masked[0][..., 0, :] = fill
        sets.append(masked)
    return sets


def unsafe_where_reference_is_finite(reference, candidate, rng) -> bool:
    """Whether the candidate is non-finite anywhere the reference is finite, in float64."""
    with np.errstate(all="ignore"):
        for inputs in adversarial_inputs(reference, rng):
            for want, got in zip(reference.evaluate(inputs), candidate.evaluate(inputs)):
                if np.any(np.isfinite(want) & ~np.isfinite(got)):
                    return True
    return False


# -------------------------------------------------------------------------- verifier


@pytest.mark.parametrize("block", [False, True])
def test_an_unstabilized_softmax_is_rejected(block, rng):
    ref = softmax_graph()
    plain = softmax_graph(stabilized=False, block=block)
    assert unsafe_where_reference_is_finite(ref, plain, rng), "the test inputs must break it"
    for a, b in ((ref, plain), (plain, ref)):
        verdict = mj.verify_equivalent(a, b)
        assert not verdict
        assert verdict.reason.startswith("not equally safe in floating point"), verdict.reason


def test_the_stabilized_block_softmax_is_accepted(rng):
    ref, fused = softmax_graph(), softmax_graph(block=True)
    assert not unsafe_where_reference_is_finite(ref, fused, rng)
    assert mj.verify_equivalent(ref, fused)


def test_the_unstabilized_split_kv_graph_is_rejected(rng):
    ref, _ = gqa_small()
    old = unstabilized_split_kv()
    assert unsafe_where_reference_is_finite(ref, old, rng)
    verdict = mj.verify_equivalent(ref, old)
    assert not verdict
    assert "not bounded above" in verdict.reason


@pytest.mark.parametrize(
    "name", ["gqa_prefill", "gqa_decode", "qknorm_gqa", "flash_attention_online"]
)
def test_the_stabilized_attention_graphs_are_accepted_and_finite(name, rng):
    program = paper_graphs.PROGRAMS[name]
    ref, fused = program.build(**program.small)
    assert not unsafe_where_reference_is_finite(ref, fused, rng)
    assert mj.verify_equivalent(ref, fused)
    assert mj.verify_equivalent(ref, fused, shrink="always")


def test_split_kv_rescales_by_the_slice_maxima():
    """Kernel 1 stores the slice maxima, a kernel-level reduce takes their max, and the
    combine kernel exponentiates their difference."""
    _, fused = gqa_small()
    kinds = [op.kind for op in fused.ops]
    assert kinds.count("customized") == 2 and "reduce" in kinds
    kernel1, kernel2 = [op.block_graph for op in fused.ops if op.kind == "customized"]
    assert {"accum_max_last", "accum_exp_sum_last", "accum_exp_matmul"} <= {
        op.kind for op in kernel1.ops
    }
    assert "exp" not in {op.kind for op in kernel1.ops}
    assert [op.kind for op in kernel2.ops].count("exp") == 1


# ---------------------------------------------------------------------------- search

SMALL = {"threads": 2, "time_budget_s": 50, "max_kernel_ops": 1, "max_block_ops": 5}


def test_search_on_a_softmax_returns_only_stabilized_candidates(rng):
    ref = softmax_graph(8, 64)
    result = mj.search(ref, mj.SearchConfig(**SMALL), progress=False)
    assert result.reason == ""
    fused = [c for c in result.candidates if any(op.kind == "customized" for op in c.ops)]
    assert fused, "the softmax no longer fuses"
    for candidate in result.candidates:
        assert not unsafe_where_reference_is_finite(ref, candidate, rng), str(candidate)


def test_search_on_attention_returns_only_stabilized_candidates(rng):
    ref, _ = paper_graphs.flash_attention_online(
        heads=2, q_len=8, kv_len=32, head_dim=4, q_tiles=2, kv_tile=8
    )
    config = mj.SearchConfig(
        preset="attention",
        threads=2,
        time_budget_s=50,
        max_kernel_ops=1,
        max_block_ops=5,
        max_grids=1,
    )
    result = mj.search(ref, config, progress=False)
    assert result.reason == ""
    assert any(op.kind == "customized" for c in result.candidates for op in c.ops)
    for candidate in result.candidates:
        assert not unsafe_where_reference_is_finite(ref, candidate, rng), str(candidate)

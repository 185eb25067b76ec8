"""The split-KV form of a one-kernel attention (cc/ir/split_kv.h, used by search.py on its
best candidates and their folds): each split verifies against the program and runs right
on scores built to break a softmax (logits far past exp's range, a slice of keys all masked
with -inf, rows masked everywhere); a combine that does not rescale the slices by their
maxima is rejected; the search returns the paper's decode μGraph form. References: the
program under the interpreter and jax.nn.softmax under XLA."""

import jax
import jax.numpy as jnp
import numpy as np
from kernel_test_support import session_kernel_cache  # noqa: F401 (an autouse fixture)

import mirage_jax as mj
from mirage_jax.ir import model_graphs, paper_graphs
from mirage_jax.superopt.split import split_kv

MASKED = model_graphs.PROGRAMS["masked_attention"].small  # 16 keys, 4 a step: 4 iterations


def kernel_level(graph) -> list[str]:
    return [op.kind for op in graph.ops if op.kind not in ("input", "output")]


def test_every_split_of_the_masked_attention_kernel_verifies():
    ref, fused = model_graphs.masked_attention(**MASKED)
    splits = split_kv(fused, [2, 3, 4])  # 3 does not divide the 4 iterations
    assert len(splits) == 2
    for split in splits:
        assert kernel_level(split) == ["customized", "reduce", "customized"]
        assert mj.verify_equivalent(ref, split)
        assert mj.verify_equivalent(split, ref)


def hard_inputs(seed: int = 3):
    rng = np.random.default_rng(seed)
    shapes = [t.shape for t in model_graphs.masked_attention(**MASKED)[0].inputs]
    q, k, v, m = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    q *= 40.0  # scores in the hundreds: exp overflows without a max, per slice or whole
    m[:] = 0.0
    m[0, 0, :8] = -np.inf  # the first slice of this row masked: its max is -inf
    m[0, 1, :] = -np.inf  # every key masked: NaN, as jax.nn.softmax gives it
    m[0, 2, :] = np.finfo(np.float32).min  # every key masked by a finite value: uniform
    m[0, 3, 1:] = -1e9  # one key seen
    return [jnp.asarray(a) for a in (q, k, v, m)]


def jax_masked_attention(q, k, v, m):
    return jax.nn.softmax(q @ k / np.sqrt(q.shape[-1]) + m, axis=-1) @ v


def test_the_split_kernels_run_like_jax_on_scores_built_to_break_them():
    _, fused = model_graphs.masked_attention(**MASKED)
    (split,) = split_kv(fused, [2])  # slices of 8 keys, 2 iterations each
    inputs = hard_inputs()
    (got,) = jax.jit(mj.compile(split))(*inputs)
    got = np.asarray(got)
    want = np.asarray(jax.jit(jax_masked_attention)(*inputs))
    nan = np.isnan(want)
    assert nan[0, 1].all() and nan.sum() == 2 * nan[0, 1].size  # the row masked with -inf
    np.testing.assert_array_equal(np.isnan(got), nan)
    scale = np.abs(np.where(nan, 0, want)).max(axis=-1, keepdims=True) + 1e-30
    error = np.abs(np.where(nan, 0, got - want)) / scale
    assert error.max() <= 2.0**-13, error.max()


def unrescaled_split():
    """gqa_decode's split-KV μGraph with a combine that adds the slices' partials as they
    are: each slice's exp(s - m_b) is on its own scale, so the sum is not the softmax's."""
    shapes = paper_graphs.PROGRAMS["gqa_decode"].small
    ref, paper = paper_graphs.gqa_decode(**shapes)
    wrong = mj.KernelGraph()
    q, k, v = (wrong.new_input(t.shape, t.dtype) for t in ref.inputs)
    (partials_kernel,) = [op for op in paper.ops if op.kind == "customized"][:1]
    ev, sums, _ = wrong.customized([q, k, v], partials_kernel.block_graph)
    bg = mj.BlockGraph(grid=(shapes["batch"], shapes["kv_heads"], 1), forloop_range=2)
    tile_ev = bg.new_input(ev, imap=(0, 1, -1), fmap=3)
    tile_sums = bg.new_input(sums, imap=(0, 1, -1), fmap=3)
    bg.new_output(bg.div(bg.accum_sum(tile_ev), bg.accum_sum(tile_sums)), omap=(0, 1, -1))
    (out,) = wrong.customized([ev, sums], bg)
    wrong.mark_output(out)
    return ref, wrong


def test_a_combine_without_the_rescale_is_rejected():
    ref, wrong = unrescaled_split()
    assert not mj.verify_equivalent(ref, wrong)


def test_the_search_returns_the_papers_decode_form():
    shapes = paper_graphs.PROGRAMS["gqa_decode"].small
    ref, paper = paper_graphs.gqa_decode(**shapes)
    result = mj.search(ref, mj.SearchConfig(threads=2, time_budget_s=3), progress=False)
    assert "split-KV graphs verified" in result.parts, result.parts
    assert result.costs == sorted(result.costs)
    split = [c for c in result if kernel_level(c) == kernel_level(paper)]
    assert split, [kernel_level(c) for c in result]
    for candidate in split:
        assert mj.verify_equivalent(ref, candidate, seed=4)

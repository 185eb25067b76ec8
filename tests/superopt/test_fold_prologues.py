"""Folding the kernel-level ops before a fused kernel into it (cc/ir/fold_prologue.h, used by
mirage_jax/superopt/parts.py on the splices of a program's parts and by search.py on its
best candidates): XLA's norms in front of the paper's attention kernel fold into the paper's
qknorm_gqa μGraph, a library matmul in front of a fused softmax into one attention kernel, a
norm whose rows a tile splits is left alone, and the verifier rejects the fold that would be
wrong. The
reference is the original program, evaluated by the interpreter and run by XLA."""

import jax
import numpy as np
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    assert_close,
    random_inputs,
    session_kernel_cache,
)

import mirage_jax as mj
from mirage_jax.ir.paper_graphs import gqa_prefill, qknorm_gqa
from mirage_jax.superopt.split import (
    fold_prologues,
    prefix_program,
    splice_parts,
    split_before_first_computed_matmul,
)

SHAPES = dict(heads=2, q_len=8, kv_len=16, head_dim=4, kv_splits=2, q_tiles=2, forloop=2)


def kernel_level(graph) -> list[str]:
    return [op.kind for op in graph.ops if op.kind not in ("input", "output")]


def xla_norms_then_attention_kernel():
    """qknorm_gqa as its parts' splice: the norms as the program writes them (kernel-level
    ops), then the paper's split-KV attention kernels over the normalized Q and K."""
    ref, _ = qknorm_gqa(**SHAPES)
    split = split_before_first_computed_matmul(ref)
    _, attention = gqa_prefill(**SHAPES)
    return ref, splice_parts(split, prefix_program(split), attention)


def hard_inputs(graph):
    """Q with a row of huge values (logits far past exp's range once scaled, were the norm
    lost) and a zero row, K with a zero key (its norm is eps alone) and a huge one."""
    q, k, v = (np.array(a, dtype=np.float32) for a in random_inputs(graph, seed=11))
    q[0, 0] *= 1e4
    q[1, 3] = 0.0
    k[0, :, 5] = 0.0
    k[1, :, 2] *= 1e5
    return [jax.numpy.asarray(a) for a in (q, k, v)]


def test_xla_norms_fold_into_the_papers_attention_kernel():
    ref, spliced = xla_norms_then_attention_kernel()
    assert "rms_norm" in kernel_level(spliced) and "sqrt" in kernel_level(spliced)
    folded = fold_prologues(spliced)
    assert folded is not None
    # every norm now runs inside the first kernel, as in the paper's μGraph, and the
    # reduce between the paper's two kernels (the partials' max) inside the second
    _, paper = qknorm_gqa(**SHAPES)
    assert kernel_level(paper) == ["customized", "reduce", "customized"]
    assert kernel_level(folded) == ["customized", "customized"]
    assert mj.verify_equivalent(ref, folded)
    inputs = hard_inputs(folded)
    (got,) = jax.jit(mj.compile(folded))(*inputs)
    (want,) = ref.evaluate([np.asarray(a) for a in inputs])
    assert np.isfinite(np.asarray(got)).all()
    assert_close(got, want, 1e-5, "folded qknorm vs the interpreter", floor=1.0)


def norm_then_kernel(steps: int):
    """rms_norm(x) at the kernel level, then one kernel multiplying it by w over 2 row blocks,
    its k dim (the norm's) walked in `steps` iterations."""
    g = mj.KernelGraph()
    x, w = g.new_input((4, 8)), g.new_input((8, 4))
    n = g.rms_norm(x, eps=1e-6)
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=steps)
    a = bg.new_input(n, imap=(0, -1, -1), fmap=1 if steps > 1 else -1)
    b = bg.new_input(w, imap=(-1, -1, -1), fmap=0 if steps > 1 else -1)
    y = bg.matmul(a, b)
    bg.new_output(bg.accum_sum(y) if steps > 1 else y, omap=(0, -1, -1))
    (out,) = g.customized([n, w], bg)
    g.mark_output(out)
    return g


def norm_folded_on_partial_rows(steps: int):
    """The fold fold_prologues refuses: rms_norm on each iteration's share of a row."""
    g = mj.KernelGraph()
    x, w = g.new_input((4, 8)), g.new_input((8, 4))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=steps)
    a = bg.new_input(x, imap=(0, -1, -1), fmap=1)
    b = bg.new_input(w, imap=(-1, -1, -1), fmap=0)
    bg.new_output(bg.accum_sum(bg.matmul(bg.rms_norm(a, eps=1e-6), b)), omap=(0, -1, -1))
    (out,) = g.customized([x, w], bg)
    g.mark_output(out)
    return g


def test_a_norm_whose_rows_the_tile_splits_is_not_folded():
    whole_rows = norm_then_kernel(steps=1)
    folded = fold_prologues(whole_rows)
    assert folded is not None and kernel_level(folded) == ["customized"]
    assert mj.verify_equivalent(whole_rows, folded)
    values = [np.asarray(a, dtype=np.float64) for a in random_inputs(whole_rows, seed=2)]
    np.testing.assert_allclose(folded.evaluate(values)[0], whole_rows.evaluate(values)[0])

    split_rows = norm_then_kernel(steps=4)
    assert fold_prologues(split_rows) is None
    # the fold it refuses computes another function, and the verifier says so
    assert not mj.verify_equivalent(split_rows, norm_folded_on_partial_rows(steps=4))


def test_a_graph_without_kernel_level_prologues_has_nothing_to_fold():
    _, spliced = xla_norms_then_attention_kernel()
    folded = fold_prologues(spliced)
    assert folded is not None
    assert fold_prologues(folded) is None


def test_the_search_returns_qknorm_with_its_norms_in_the_attention_kernel():
    ref, _ = qknorm_gqa(**SHAPES)
    config = mj.SearchConfig(threads=2, time_budget_s=10)
    result = mj.search(ref, config, progress=False)
    assert "its parts were searched" in result.parts
    fused = [c for c in result if set(kernel_level(c)) == {"customized"}]
    assert fused, [kernel_level(c) for c in result]
    for candidate in fused:
        assert mj.verify_equivalent(ref, candidate, seed=5)


def test_the_search_folds_the_library_scores_into_its_attention_kernel():
    # Four block ops hold the softmax and P @ V but not the scores' matmul besides: every
    # kernel the search makes leaves Q @ K to the library, and only a fold has it inside.
    ref, _ = gqa_prefill(**SHAPES)
    config = mj.SearchConfig(threads=2, time_budget_s=5, max_block_ops=4)
    result = mj.search(ref, config, progress=False)
    assert "folded graphs verified" in result.parts, result.parts
    assert result.costs == sorted(result.costs)

    def block_ops(c):
        (kernel,) = [op for op in c.ops if op.kind == "customized"]
        return [op.kind for op in kernel.block_graph.ops if op.kind not in ("input", "output")]

    one_kernel = [c for c in result if kernel_level(c) == ["customized"]]
    folded = [c for c in one_kernel if len(block_ops(c)) > 4]
    assert folded, [kernel_level(c) for c in result]
    best = folded[0]
    assert "matmul" in block_ops(best)
    assert mj.verify_equivalent(ref, best, seed=9)
    inputs = hard_inputs(best)
    (got,) = jax.jit(mj.compile(best))(*inputs)
    (want,) = ref.evaluate([np.asarray(a) for a in inputs])
    assert np.isfinite(np.asarray(got)).all()
    assert_close(got, want, 1e-5, "folded attention vs the interpreter", floor=1.0)


if __name__ == "__main__":
    pytest.main([__file__, "-q"])

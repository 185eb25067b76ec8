"""Splitting a program the search cannot fuse whole (mirage_jax/superopt/split.py, parts.py):
the prefix before the first matmul of computed values and the tail from it are searched as
programs of their own, by mj.search itself, and spliced back together. The reference is the
original program: every spliced graph must be equivalent to it, and superoptimize must
verify, float-check and run the spliced choice like any candidate."""

import jax
import numpy as np
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    assert_close,
    random_inputs,
    session_kernel_cache,
)

import mirage_jax as mj
from mirage_jax.ir.paper_graphs import flash_attention_online, qknorm_gqa, rmsnorm_linear
from mirage_jax.runtime import profile as _profile
from mirage_jax.superopt.split import (
    prefix_program,
    splice,
    splice_parts,
    split_before_first_computed_matmul,
)
from mirage_jax.superopt.verify import verify_equivalent

SHAPES = dict(heads=2, q_len=8, kv_len=16, head_dim=4)


def qknorm():
    ref, _ = qknorm_gqa(**SHAPES, kv_splits=2, q_tiles=2, forloop=2)
    return ref


def test_the_cut_is_before_the_first_matmul_of_computed_values():
    split = split_before_first_computed_matmul(qknorm())
    # rms_norm(Q), the normalized K and V cross the cut; the tail is plain attention
    assert [t.shape for t in split.tail.inputs] == [(2, 8, 4), (2, 4, 16), (2, 16, 4)]
    kinds = [op.kind for op in split.tail.ops if op.kind not in ("input", "output")]
    assert kinds[0] == "matmul" and kinds[-1] == "matmul" and "rms_norm" not in kinds
    assert mj.verify_equivalent(qknorm(), splice(split, split.tail))


def test_a_fused_tail_spliced_back_is_the_original_program():
    _, online = flash_attention_online(**SHAPES, q_tiles=2, kv_tile=4, scale=0.5)
    spliced = splice(split_before_first_computed_matmul(qknorm()), online)
    assert [op.kind for op in spliced.ops].count("customized") == 1
    assert mj.verify_equivalent(qknorm(), spliced)
    inputs = random_inputs(spliced, seed=3)
    (got,) = jax.jit(mj.compile(spliced))(*inputs)
    (want,) = jax.jit(mj.compile(qknorm()))(*inputs)
    assert_close(got, want, 1e-5, "spliced vs original", floor=1.0)
    # a tail that computes something else is caught by the verifier, not by the splice
    _, wrong = flash_attention_online(**SHAPES, q_tiles=2, kv_tile=4, scale=0.25)
    assert not mj.verify_equivalent(
        qknorm(), splice(split_before_first_computed_matmul(qknorm()), wrong)
    )


def test_programs_with_nothing_to_split_give_none():
    ref, _ = rmsnorm_linear(batch=2, hidden=8, out_features=4, col_tile=2, k_tile=2)
    # its matmul reads rms_norm(X)·g, a computed value, but everything before is the norm:
    # a split exists, and the tail is the matmul alone
    assert split_before_first_computed_matmul(ref) is not None
    plain = mj.KernelGraph()
    x, w = plain.new_input((2, 8)), plain.new_input((8, 4))
    plain.mark_output(plain.exp(plain.matmul(x, w)))  # the matmul reads inputs only
    assert split_before_first_computed_matmul(plain) is None
    only_before = mj.KernelGraph()
    x, w = only_before.new_input((2, 8)), only_before.new_input((8, 8))
    e = only_before.exp(x)
    only_before.matmul(e, w)
    only_before.mark_output(e)  # every output made before the cut: the tail makes none
    assert split_before_first_computed_matmul(only_before) is None


def residual_norm_linear():
    """s = a + b, returned for the next layer and normed into a matmul (a decoder layer's
    residual stream): outputs s, then the matmul's."""
    g = mj.KernelGraph()
    a, b, w = g.new_input((4, 16)), g.new_input((4, 16)), g.new_input((16, 8))
    s = g.add(a, b)
    g.mark_output(s)  # as the frontend marks it: where it is made, before the cut
    g.mark_output(g.matmul(g.rms_norm(s, 1e-6), w))
    return g


def test_an_output_made_before_the_cut_is_made_by_the_prefix():
    g = residual_norm_linear()
    split = split_before_first_computed_matmul(g)
    assert split is not None
    prefix = prefix_program(split)
    assert len(prefix.outputs) == 2  # the norm the tail reads, and the returned sum
    assert len(split.tail.outputs) == 1
    assert verify_equivalent(g, splice_parts(split, prefix, split.tail)).equivalent
    # and the search's splices of found parts are checked against the whole like any other
    result = mj.search(
        g,
        mj.SearchConfig(
            max_kernel_ops=1, max_block_ops=2, time_budget_s=20, threads=2, deepen=False
        ),
        progress=False,
    )
    assert result.parts is not None and "cut before" in result.parts
    fused = [c for c in result.candidates if any(op.kind == "customized" for op in c.ops)]
    assert fused
    for candidate in fused:
        assert verify_equivalent(g, candidate).equivalent
        values = random_inputs(g)
        for got, want in zip(candidate.evaluate(values), g.evaluate(values)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# One kernel of at most 5 block ops cannot hold the norms and the attention together.
WHOLE_TOO_BIG = dict(
    preset="attention",
    max_kernel_ops=1,
    max_block_ops=5,
    max_grid_axes=1,
    max_grids=1,
    max_verified=4,
    threads=2,
    time_budget_s=60,
)


def test_the_search_fuses_the_parts_when_the_whole_fuses_nothing():
    result = mj.search(qknorm(), mj.SearchConfig(**WHOLE_TOO_BIG), progress=False)
    assert result.parts.startswith("its parts were searched (nothing fused the whole program;")
    assert "cut before t9" in result.parts
    fused = [c for c in result if any(op.kind == "customized" for op in c.ops)]
    assert fused, result.parts
    assert len(result.costs) == len(result.candidates)
    assert result.costs == sorted(result.costs)
    for candidate in fused:
        assert mj.verify_equivalent(qknorm(), candidate, seed=7)


def test_a_program_that_fuses_whole_still_searches_its_parts_with_the_budget_left():
    # A whole fused at a poor grid can lose to a cut one (the norm apart, the matmul walked
    # along k), so the parts get what the whole left, and both rank on one scale.
    ref, _ = rmsnorm_linear(batch=2, hidden=64, out_features=32, col_tile=16, k_tile=16)
    assert split_before_first_computed_matmul(ref) is not None  # it could be cut
    config = mj.SearchConfig(max_kernel_ops=1, max_block_ops=5, threads=2, time_budget_s=30)
    result = mj.search(ref, config, progress=False)
    assert result.parts.startswith("its parts were searched (the whole program fused too;")
    kernel_level = {"input", "output", "customized"}

    def fused_whole(c):
        return all(op.kind in kernel_level for op in c.ops) and any(
            op.kind == "customized" for op in c.ops
        )

    def spliced(c):  # a fused part beside the other part's ops at kernel level
        kinds = {op.kind for op in c.ops}
        return "customized" in kinds and bool(kinds - kernel_level)

    assert any(map(fused_whole, result.candidates)), result.parts
    assert any(map(spliced, result.candidates)), result.parts
    assert result.costs == sorted(result.costs)
    for candidate in result.candidates:
        assert mj.verify_equivalent(ref, candidate, seed=3)


def test_the_prefix_is_replaced_too():
    split = split_before_first_computed_matmul(qknorm())
    prefix = prefix_program(split)
    # its outputs: rms_norm(Q) and the normalized K (V crosses the cut as an input)
    assert [t.shape for t in prefix.outputs] == [(2, 8, 4), (2, 4, 16)]
    # a kernel per norm
    config = mj.SearchConfig(
        max_kernel_ops=2, max_block_ops=5, threads=2, time_budget_s=10, deepen=False
    )
    norms = [
        c
        for c in mj.search(prefix, config, progress=False)
        if any(op.kind == "customized" for op in c.ops)
    ]
    assert norms
    _, online = flash_attention_online(**SHAPES, q_tiles=2, kv_tile=4, scale=0.5)
    both = splice_parts(split, norms[0], online)
    assert [op.kind for op in both.ops].count("customized") == 2
    assert mj.verify_equivalent(qknorm(), both)
    inputs = random_inputs(both, seed=5)
    (got,) = jax.jit(mj.compile(both))(*inputs)
    (want,) = jax.jit(mj.compile(qknorm()))(*inputs)
    assert_close(got, want, 1e-5, "both parts spliced vs original", floor=1.0)
    # a prefix that computes something else is caught by the verifier
    wrong = mj.KernelGraph()
    q, k = wrong.new_input((2, 8, 4)), wrong.new_input((2, 4, 16))
    wrong.new_input((2, 16, 4))
    wrong.mark_output(wrong.rms_norm(q, eps=1e-6))
    wrong.mark_output(k)  # K not normalized
    assert not mj.verify_equivalent(qknorm(), splice_parts(split, wrong, split.tail))


def test_superoptimize_runs_the_spliced_parts(monkeypatch):
    def kernels_first(functions, args, budget_s=None, arg_sets=None):  # kernels beat XLA
        return {name: 1e-3 if name == "xla" else 5e-4 for name in functions}, 5

    monkeypatch.setattr(_profile, "median_times", kernels_first)
    config = mj.SearchConfig(**WHOLE_TOO_BIG)
    fast = mj.superoptimize(qknorm(), config, top_k=2, progress=False)
    assert any(op.kind == "customized" for op in fast.graph.ops), fast.report()
    assert "its parts were searched" in fast.report()
    assert mj.verify_equivalent(qknorm(), fast.graph)
    inputs = random_inputs(qknorm(), seed=4)
    (got,) = fast(*inputs)
    (want,) = jax.jit(mj.compile(qknorm()))(*inputs)
    assert_close(got, want, 1e-5, "superoptimized qknorm vs XLA", floor=1.0)
    assert np.isfinite(np.asarray(got)).all()


if __name__ == "__main__":
    pytest.main([__file__, "-q"])

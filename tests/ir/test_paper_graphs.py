"""The paper's μGraphs (mirage_jax.paper_graphs) at small shapes: the fused graph, the
reference graph and a numpy implementation written here agree under the interpreter, and the
verifier accepts the pair in both directions."""

import numpy as np
import pytest

import mirage_jax as mj
from mirage_jax.ir import paper_graphs


def _rms_norm(x, eps, axis=-1):
    return x / np.sqrt(np.mean(x * x, axis=axis, keepdims=True) + eps)


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _attention(q, k, v):
    """q [..., rows, d], k pre-transposed [..., d, kv], v [..., kv, d]."""
    return _softmax(q @ k / np.sqrt(q.shape[-1])) @ v


def _qknorm_attention(q, k, v, eps=1e-6):
    return _attention(_rms_norm(q, eps), _rms_norm(k, eps, axis=-2), v)


NUMPY = {
    "rmsnorm_linear": lambda x, g, w: (_rms_norm(x, 1e-6) * g) @ w,
    "gated_mlp": lambda x, w1, w3: (x @ w1) / (1 + np.exp(-(x @ w1))) * (x @ w3),
    "lora": lambda x, w, a, b: x @ w + (x @ a) @ b,
    "gqa_prefill": _attention,
    "gqa_decode": _attention,
    "flash_attention_online": _attention,
    "qknorm_gqa": _qknorm_attention,
    "ntrans": lambda h, x, alpha: _rms_norm(x + alpha * (_rms_norm(h, 1e-6) - x), 1e-6),
}


def input_shapes(kg):
    return [t.shape for t in kg.inputs]


def test_every_program_has_a_numpy_reference():
    assert sorted(NUMPY) == sorted(paper_graphs.PROGRAMS)


@pytest.fixture(params=sorted(paper_graphs.PROGRAMS))
def program(request):
    return paper_graphs.PROGRAMS[request.param]


def test_fused_reference_and_numpy_agree(program, rng):
    ref, fused = program.build(**program.small)
    assert input_shapes(ref) == input_shapes(fused)
    inputs = [rng.normal(size=s) for s in input_shapes(ref)]
    expected = NUMPY[program.name](*inputs)
    (y_ref,) = ref.evaluate(inputs, dtype="float64")
    (y_fused,) = fused.evaluate(inputs, dtype="float64")
    assert y_ref.shape == y_fused.shape == expected.shape
    np.testing.assert_allclose(y_ref, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y_fused, expected, rtol=1e-12, atol=1e-12)


def test_fused_matches_in_float32(program, rng):
    ref, fused = program.build(**program.small)
    inputs = [rng.normal(size=s).astype(np.float32) for s in input_shapes(ref)]
    (y_ref,) = ref.evaluate(inputs, dtype="float32")
    (y_fused,) = fused.evaluate(inputs, dtype="float32")
    np.testing.assert_allclose(y_fused, y_ref, rtol=2e-5, atol=2e-5)


def test_verifier_accepts_both_directions(program):
    ref, fused = program.build(**program.small)
    forward = mj.verify_equivalent(ref, fused)
    assert forward, forward.reason
    backward = mj.verify_equivalent(fused, ref)
    assert backward, backward.reason


def test_fused_graphs_use_block_graphs_and_references_do_not(program):
    """The pair is a real rewrite: every fused graph has a customized op and the reference
    only kernel-level ops."""
    ref, fused = program.build(**program.small)
    assert not any(op.kind == "customized" for op in ref.ops)
    assert any(op.kind == "customized" for op in fused.ops)


def test_tilings_that_do_not_divide_are_refused_by_name():
    with pytest.raises(ValueError, match="col_tile"):
        paper_graphs.rmsnorm_linear(out_features=100, col_tile=64)
    with pytest.raises(ValueError, match="kv_splits"):
        paper_graphs.gqa_prefill(kv_len=1000)


def test_paper_gqa_structure_at_full_size():
    """The split-KV kernel of the paper's GQA μGraph: grid (2, 8, 16), for-loop 4, Q imap
    (0, -1, 1), K imap (0, 2, -1) fmap 2, V imap (0, 1, -1) fmap 1, partials omap (0, 2, 1):
    exp(S - m)·V, the row sums of exp(S - m) and the slice's row max m, which the combine
    kernel rescales by (a split softmax stays max-stabilized)."""
    _, fused = paper_graphs.gqa_prefill()
    kernel1, kernel2 = [op.block_graph for op in fused.ops if op.kind == "customized"]
    assert tuple(kernel1.grid) == (2, 8, 16) and kernel1.forloop_range == 4
    ins = [op for op in kernel1.ops if op.kind == "input"]
    assert [(op.imap, op.fmap) for op in ins] == [
        ((0, -1, 1), -1),
        ((0, 2, -1), 2),
        ((0, 1, -1), 1),
    ]
    assert [op.omap for op in kernel1.ops if op.kind == "output"] == [(0, 2, 1)] * 3
    assert kernel2.forloop_range == 8

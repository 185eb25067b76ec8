"""The public graph API: builders at both levels, read accessors, evaluate, verify, hash."""

import re

import numpy as np
import pytest

import mirage_jax as mj

UNARY = ["exp", "square", "sqrt", "rsqrt", "silu", "gelu", "relu", "sigmoid", "neg", "recip"]
BINARY = ["add", "sub", "mul", "div"]


def rms_norm_np(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def test_api_example_verbatim_at_small_shapes():
    # The README / brief example, with shapes small enough to interpret quickly.
    ref = mj.KernelGraph()
    X = ref.new_input((8, 256), "float32")
    G = ref.new_input((256,), "float32")
    W = ref.new_input((256, 192), "float32")
    ref.mark_output(ref.matmul(ref.mul(ref.rms_norm(X, eps=1e-6), G), W))

    fused = mj.KernelGraph()
    X = fused.new_input((8, 256), "float32")
    G = fused.new_input((256,), "float32")
    W = fused.new_input((256, 192), "float32")
    bg = mj.BlockGraph(grid=(3, 1, 1), forloop_range=4)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    g = bg.new_input(G, imap=(-1, -1, -1), fmap=0)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    acc = bg.accum_sum(bg.matmul(bg.mul(x, g), w))
    ms = bg.accum_mean_last(bg.square(x))
    bg.new_output(bg.div(acc, bg.sqrt(bg.add_scalar(ms, 1e-6))), omap=(1, -1, -1))
    (Y,) = fused.customized([X, G, W], bg)
    fused.mark_output(Y)

    assert (x.shape, g.shape, w.shape) == ((8, 64), (64,), (64, 64))
    assert (acc.shape, ms.shape, Y.shape) == ((8, 64), (8, 1), (8, 192))
    result = mj.verify_equivalent(ref, fused)
    assert result and result.equivalent and result.reason == ""

    rng = np.random.default_rng(0)
    x_np, g_np, w_np = (rng.standard_normal(t.shape) for t in fused.inputs)
    (y,) = fused.evaluate([x_np, g_np, w_np])
    np.testing.assert_allclose(y, (rms_norm_np(x_np, 1e-6) * g_np) @ w_np, rtol=1e-10, atol=1e-10)

    s = fused.to_json()
    assert mj.KernelGraph.from_json(s).hash() == fused.hash()
    assert re.fullmatch(r"[0-9a-f]{32}", fused.hash())
    text = str(fused)
    assert "customized" in text and "accum_mean_last" in text and "imap" in text


@pytest.mark.parametrize("kind", UNARY)
def test_unary_builders(kind):
    kg = mj.KernelGraph()
    x = kg.new_input((2, 3), "float16")
    y = getattr(kg, kind)(x)
    op = kg.ops[-1]
    assert op.kind == kind and op.inputs == [x] and op.outputs == [y]
    assert (y.shape, y.dtype) == ((2, 3), "float16")
    assert op.scalar is None and op.dim is None and op.reduce_kind is None


@pytest.mark.parametrize("kind", BINARY)
def test_binary_builders_broadcast(kind):
    kg = mj.KernelGraph()
    a = kg.new_input((4, 1, 5))
    b = kg.new_input((3, 1))
    c = getattr(kg, kind)(a, b)
    assert kg.ops[-1].kind == kind and kg.ops[-1].inputs == [a, b]
    assert c.shape == (4, 3, 5)


@pytest.mark.parametrize("kind, c", [("mul_scalar", 0.125), ("add_scalar", -3.0)])
def test_scalar_builders_record_the_constant(kind, c):
    kg = mj.KernelGraph()
    y = getattr(kg, kind)(kg.new_input((4,)), c)
    assert kg.ops[-1].scalar == c and y.shape == (4,)


def test_matmul_reduce_rms_norm_concat():
    kg = mj.KernelGraph()
    a = kg.new_input((2, 4, 8), "bfloat16")
    b = kg.new_input((8, 3), "bfloat16")
    m = kg.matmul(a, b)
    assert (m.shape, m.dtype) == ((2, 4, 3), "bfloat16")

    r = kg.reduce(m, -2, "max")
    op = kg.ops[-1]
    assert r.shape == (2, 1, 3) and op.dim == 1 and op.reduce_kind == "max"
    assert kg.ops[-1].scalar is None
    assert kg.reduce(m, 0).shape == (1, 4, 3) and kg.ops[-1].reduce_kind == "sum"

    n = kg.rms_norm(a, eps=1e-5)
    assert n.shape == (2, 4, 8) and kg.ops[-1].scalar == 1e-5

    c = kg.concat(a, a, dim=-1)
    assert c.shape == (2, 4, 16) and kg.ops[-1].dim == 2


def test_mixed_dtypes_give_float32():
    kg = mj.KernelGraph()
    assert kg.add(kg.new_input((2,), "float16"), kg.new_input((2,), "bfloat16")).dtype == "float32"


def test_kernel_graph_read_accessors():
    kg = mj.KernelGraph()
    a = kg.new_input((2, 3))
    b = kg.new_input((3, 4))
    y = kg.matmul(a, b)
    kg.mark_output(y)
    kg.mark_output(a)  # an input may be an output too
    assert kg.inputs == [a, b] and kg.outputs == [y, a]
    assert [op.kind for op in kg.ops] == ["input", "input", "matmul", "output", "output"]
    assert [op.index for op in kg.ops] == [0, 1, 2, 3, 4]
    assert kg.ops[3].inputs == [y] and kg.ops[3].outputs == []
    assert y.producer.kind == "matmul" and y.name == "t2" and y.graph is kg
    assert y.phase is None  # phases belong to block graphs
    assert kg.tensors == [a, b, y]
    assert all(op.block_graph is None and op.imap is None for op in kg.ops)
    assert all(op.fusion_group is None for op in kg.ops)
    assert "KernelGraph#" in repr(kg) and "t2" in repr(y)


def attention_block_graph(kg, q, k, v):
    """Online softmax over for-loop tiles of the keys: softmax(q @ k) @ v, and the row max."""
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=4)
    tq = bg.new_input(q, imap=(0, -1, -1), fmap=-1)
    tk = bg.new_input(k, imap=(-1, -1, -1), fmap=1)
    tv = bg.new_input(v, imap=(-1, -1, -1), fmap=0)
    s = bg.matmul(tq, tk)
    m = bg.accum_max_last(s)
    denominator = bg.accum_exp_sum_last(s)
    o = bg.accum_exp_matmul(s, tv)
    bg.new_output(bg.div(o, denominator), omap=(0, -1, -1))
    bg.new_output(m, omap=(0, -1, -1), dtype="bfloat16")
    return bg, (tq, tk, tv, s, m, denominator, o)


def test_online_softmax_accumulators():
    kg = mj.KernelGraph()
    q, k, v = kg.new_input((4, 16)), kg.new_input((16, 32)), kg.new_input((32, 16))
    bg, (tq, tk, tv, s, m, denominator, o) = attention_block_graph(kg, q, k, v)
    assert (tq.shape, tk.shape, tv.shape) == ((2, 16), (16, 8), (8, 16))
    assert (tq.phase, tk.phase, s.phase) == ("invariant", "body", "body")
    assert (m.shape, denominator.shape, o.shape) == ((2, 1), (2, 1), (2, 16))
    assert {m.phase, denominator.phase, o.phase} == {"epilogue"}
    out, row_max = kg.customized([q, k, v], bg)
    assert (out.shape, out.dtype) == ((4, 16), "float32")
    assert (row_max.shape, row_max.dtype) == ((4, 1), "bfloat16")
    kg.mark_output(out)
    kg.mark_output(row_max)

    rng = np.random.default_rng(1)
    qn, kn, vn = (rng.standard_normal(t.shape) for t in (q, k, v))
    got_out, got_max = kg.evaluate([qn, kn, vn])
    scores = qn @ kn
    p = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(got_out, p / p.sum(-1, keepdims=True) @ vn, rtol=1e-10)
    np.testing.assert_allclose(got_max, scores.max(-1, keepdims=True), rtol=1e-12)


def test_row_accumulators_and_block_read_accessors():
    kg = mj.KernelGraph()
    X = kg.new_input((4, 32))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=4)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=1)
    rms = bg.accum_rms_last(x, eps=1e-5)
    total = bg.accum_sum_last(x)
    bg.new_output(rms, omap=(0, -1, -1))
    bg.new_output(bg.mul_scalar(total, 0.5), omap=(0, -1, -1), dtype="float16")
    assert bg.grid == (2, 1, 1) and bg.forloop_range == 4 and bg.num_blocks == 2
    assert bg.inputs == [x] and len(bg.outputs) == 2

    op_in, op_rms = bg.ops[0], bg.ops[1]
    assert op_in.kind == "input" and op_in.imap == (0, -1, -1) and op_in.fmap == 1
    assert op_in.kernel_shape == (4, 32) and op_in.dtype == "float32" and op_in.omap is None
    assert op_rms.kind == "accum_rms_last" and op_rms.scalar == 1e-5
    stores = [op for op in bg.ops if op.kind == "output"]
    assert [s.omap for s in stores] == [(0, -1, -1), (0, -1, -1)]
    assert [s.dtype for s in stores] == ["float32", "float16"]
    assert [s.kernel_shape for s in stores] == [(4, 1), (4, 1)]
    assert [s.imap for s in stores] == [None, None]

    rms_out, half_sum_out = kg.customized([X], bg)
    kg.mark_output(half_sum_out)
    kg.mark_output(rms_out)
    x_np = np.random.default_rng(2).standard_normal((4, 32))
    got_half_sum, got_rms = kg.evaluate([x_np])
    np.testing.assert_allclose(got_half_sum, 0.5 * x_np.sum(-1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(
        got_rms, np.sqrt(np.mean(x_np**2, -1, keepdims=True) + 1e-5), rtol=1e-12
    )


def test_block_graph_of_customized_op_is_a_read_only_copy():
    kg = mj.KernelGraph()
    X = kg.new_input((4, 8))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    t = bg.exp(bg.new_input(X, imap=(0, -1, -1), fmap=-1))
    bg.new_output(t, omap=(0, -1, -1))
    (Y,) = kg.customized([X], bg)
    before = kg.hash()
    bg.neg(t)  # later edits to the builder do not reach the customized op
    copy = kg.ops[1].block_graph
    assert kg.ops[1].kind == "customized" and copy is kg.ops[1].block_graph
    assert [op.kind for op in copy.ops] == ["input", "exp", "output"]
    assert copy.grid == (2, 1, 1) and copy.hash() != bg.hash() and kg.hash() == before
    with pytest.raises(ValueError, match="read-only"):
        copy.exp(copy.inputs[0])
    # A read-back block graph can still define an op of another kernel graph.
    other = mj.KernelGraph()
    (Z,) = other.customized([other.new_input((4, 8))], copy)
    assert Z.shape == Y.shape


def test_fusion_groups_follow_elementwise_chains():
    kg = mj.KernelGraph()
    X = kg.new_input((4, 32))
    bg = mj.BlockGraph(grid=(1, 1, 1), forloop_range=4)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    ms = bg.accum_mean_last(bg.square(x))
    bg.new_output(bg.sqrt(bg.add_scalar(ms, 1e-6)), omap=(-1, -1, -1))
    kinds = [op.kind for op in bg.ops]
    groups = [op.fusion_group for op in bg.ops]
    assert kinds == ["input", "square", "accum_mean_last", "add_scalar", "sqrt", "output"]
    assert groups[0] is None and groups[-1] is None
    # add_scalar and sqrt are their producers' only consumers, in the same phase.
    assert groups[2] == groups[3] == groups[4] == 2


def test_hash_ignores_the_order_of_independent_ops():
    def build(exp_first):
        kg = mj.KernelGraph()
        a, b = kg.new_input((3,)), kg.new_input((3,))
        if exp_first:
            e = kg.exp(a)
            s = kg.sqrt(b)
        else:
            s = kg.sqrt(b)
            e = kg.exp(a)
        kg.mark_output(kg.add(e, s))
        return kg

    assert build(True).hash() == build(False).hash()
    other = mj.KernelGraph()
    a, b = other.new_input((3,)), other.new_input((3,))
    other.mark_output(other.add(other.exp(b), other.sqrt(a)))
    assert other.hash() != build(True).hash()


def test_evaluate_converts_layouts_and_dtypes():
    kg = mj.KernelGraph()
    a, b = kg.new_input((3, 2)), kg.new_input((2, 4))
    kg.mark_output(kg.matmul(a, b))
    a_np = np.asfortranarray(np.arange(6.0).reshape(3, 2))
    b_np = np.arange(8, dtype=np.int32).reshape(4, 2).T  # a transposed view of ints
    (y64,) = kg.evaluate([a_np, b_np])
    (y32,) = kg.evaluate((a_np.tolist(), b_np), dtype="float32")
    assert y64.dtype == np.float64 and y32.dtype == np.float32
    np.testing.assert_array_equal(y64, a_np @ b_np)
    np.testing.assert_array_equal(y32, (a_np @ b_np).astype(np.float32))
    y64[0, 0] = 1e9  # results own their memory
    assert kg.evaluate([a_np, b_np])[0][0, 0] == (a_np @ b_np)[0, 0]


def test_verify_result_reports_a_difference():
    def graph(scale):
        kg = mj.KernelGraph()
        kg.mark_output(kg.mul_scalar(kg.exp(kg.new_input((4, 4))), scale))
        return kg

    same = mj.verify_equivalent(graph(2.0), graph(2.0), seed=7)
    assert same and isinstance(same, mj.VerifyResult)
    assert same.trials >= 1 and same.false_accept_bound <= 2.0**-40
    different = mj.verify_equivalent(graph(2.0), graph(0.5), trials=2, shrink="never")
    assert not different and different.reason and not different.shrunk
    assert "equivalent=False" in repr(different) and "false_accept_bound" in repr(different)

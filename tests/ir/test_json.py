"""to_json / from_json: lossless round trips, and clear ValueErrors for malformed input."""

import json

import numpy as np
import pytest

import mirage_jax as mj


def every_kernel_op_graph():
    kg = mj.KernelGraph()
    a = kg.new_input((2, 4, 8), "bfloat16")
    b = kg.new_input((8, 8), "float16")
    t = kg.matmul(a, b)
    for kind in (
        "exp",
        "square",
        "sqrt",
        "rsqrt",
        "silu",
        "gelu",
        "relu",
        "sigmoid",
        "neg",
        "recip",
    ):
        t = getattr(kg, kind)(t)
    t = kg.mul_scalar(kg.add_scalar(t, 0.1), 1 / 3)  # constants that are not short decimals
    t = kg.div(kg.mul(kg.sub(kg.add(t, a), a), t), a)
    t = kg.concat(kg.reduce(t, -1, "mean"), kg.reduce(t, 2, "max"), dim=-1)
    t = kg.rms_norm(kg.concat(t, kg.reduce(t, 1), dim=1), eps=1e-300)
    kg.mark_output(t)
    kg.mark_output(a)
    return kg


def every_accumulator_graph():
    """Two customized ops: online softmax attention, and the row accumulators."""
    kg = mj.KernelGraph()
    q, k, v = kg.new_input((4, 16)), kg.new_input((16, 32)), kg.new_input((32, 16), "bfloat16")
    att = mj.BlockGraph(grid=(2, 1, 1), forloop_range=4)
    tq = att.new_input(q, imap=(0, -1, -1), fmap=-1)
    tk = att.new_input(k, imap=(-1, -1, -1), fmap=1)
    tv = att.new_input(v, imap=(-1, -1, -1), fmap=0)
    s = att.matmul(tq, tk)
    att.new_output(
        att.div(att.accum_exp_matmul(s, tv), att.accum_exp_sum_last(s)),
        omap=(0, -1, -1),
        dtype="float16",
    )
    att.new_output(att.accum_max_last(s), omap=(0, -1, -1))
    out, row_max = kg.customized([q, k, v], att)

    rows = mj.BlockGraph(grid=(1, 2, 1), forloop_range=2)
    x = rows.new_input(out, imap=(-1, 0, -1), fmap=1)
    rows.new_output(rows.accum_rms_last(x, eps=2.5e-7), omap=(-1, 0, -1))
    rows.new_output(rows.accum_mean_last(x), omap=(-1, 0, -1))
    rows.new_output(rows.accum_sum_last(x), omap=(-1, 0, -1), dtype="bfloat16")
    rows.new_output(rows.accum_sum(rows.mul(x, x)), omap=(-1, 0, -1))
    for t in kg.customized([out], rows) + (row_max,):
        kg.mark_output(t)
    return kg


def rmsnorm_linear_graph():
    kg = mj.KernelGraph()
    X, G, W = kg.new_input((8, 64)), kg.new_input((64,)), kg.new_input((64, 48))
    bg = mj.BlockGraph(grid=(3, 1, 1), forloop_range=4)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    g = bg.new_input(G, imap=(-1, -1, -1), fmap=0)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    acc = bg.accum_sum(bg.matmul(bg.mul(x, g), w))
    ms = bg.accum_mean_last(bg.square(x))
    bg.new_output(bg.div(acc, bg.sqrt(bg.add_scalar(ms, 1e-6))), omap=(1, -1, -1))
    kg.mark_output(kg.customized([X, G, W], bg)[0])
    return kg


GRAPHS = [every_kernel_op_graph, every_accumulator_graph, rmsnorm_linear_graph]


def op_summary(graph):
    """Everything the read accessors expose, nested block graphs included."""
    rows = []
    for op in graph.ops:
        rows.append(
            (
                op.kind,
                [(t.id, t.shape, t.dtype, t.phase) for t in op.inputs + op.outputs],
                op.scalar,
                op.dim,
                op.reduce_kind,
                op.imap,
                op.fmap,
                op.omap,
                op.kernel_shape,
                op.dtype,
                op.fusion_group,
            )
        )
        if op.block_graph is not None:
            bg = op.block_graph
            rows.append((bg.grid, bg.forloop_range, op_summary(bg)))
    return rows


@pytest.mark.parametrize("build", GRAPHS)
def test_round_trip_is_lossless(build):
    graph = build()
    text = graph.to_json()
    again = mj.KernelGraph.from_json(text)
    assert again.to_json() == text
    assert again.hash() == graph.hash()
    assert str(again) == str(graph)
    assert op_summary(again) == op_summary(graph)


def test_round_trip_keeps_values():
    graph = every_accumulator_graph()
    again = mj.KernelGraph.from_json(graph.to_json().encode())  # bytes are accepted too
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal(t.shape) for t in graph.inputs]
    for want, got in zip(graph.evaluate(inputs), again.evaluate(inputs)):
        np.testing.assert_array_equal(want, got)


def test_document_shape():
    doc = json.loads(every_kernel_op_graph().to_json())
    assert doc["format"] == "mirage_jax.kernel_graph" and doc["version"] == 1
    scalars = [op["scalar"] for op in doc["ops"] if "scalar" in op]
    assert scalars == [0.1, 1 / 3, 1e-300]
    assert {"kind": "output", "inputs": [0]} in doc["ops"]
    doc = json.loads(every_accumulator_graph().to_json())
    block = doc["ops"][3]["block_graph"]
    assert block["grid"] == [2, 1, 1] and block["forloop_range"] == 4
    assert block["ops"][1] == {
        "kind": "input",
        "outputs": [1],
        "shape": [16, 32],
        "dtype": "float32",
        "imap": [-1, -1, -1],
        "fmap": 1,
    }


def edit(mutate):
    doc = json.loads(every_accumulator_graph().to_json())
    mutate(doc)
    return json.dumps(doc)


def block_op(doc, index):
    return doc["ops"][3]["block_graph"]["ops"][index]


MALFORMED = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "the document must be a JSON object"),
    (edit(lambda d: d.update(format="other")), "has format 'other'"),
    (edit(lambda d: d.update(version=2)), "has version 2"),
    (edit(lambda d: d.pop("ops")), "the document is missing 'ops'"),
    (edit(lambda d: d.update(extra=1)), "the document has unexpected 'extra'"),
    (edit(lambda d: d.update(ops={})), "ops must be a list"),
    (edit(lambda d: d["ops"].insert(0, 5)), r"ops\[0\] must be a JSON object"),
    (edit(lambda d: d["ops"][0].update(kind="reshape")), r"ops\[0\] has unknown kind 'reshape'"),
    (
        edit(lambda d: d["ops"][0].update(kind="accum_sum")),
        "unknown kind 'accum_sum' for a KernelGraph",
    ),
    (edit(lambda d: d["ops"][0].pop("dtype")), r"ops\[0\] \(input\) is missing 'dtype'"),
    (edit(lambda d: d["ops"][0].update(imap=[0])), r"ops\[0\] \(input\) has unexpected 'imap'"),
    (edit(lambda d: d["ops"][0].update(shape=[4, "16"])), r"ops\[0\] \(input\).*shape\[1\]"),
    (edit(lambda d: d["ops"][0].update(dtype="int4")), "unknown dtype 'int4'"),
    (edit(lambda d: d["ops"][0].update(shape=[4, 0])), r"ops\[0\] \(input\): .*new_input"),
    (edit(lambda d: d["ops"][3].update(inputs=[0, 1, 9])), "uses tensor id 9"),
    (edit(lambda d: d["ops"][3].update(inputs=[0, 1, True])), "list of integer tensor ids"),
    (edit(lambda d: d["ops"][3].update(inputs=[0, 1])), r"ops\[3\] \(customized\): .*customized"),
    (edit(lambda d: d["ops"][3].update(outputs=[4])), "records 1 outputs but the op has 2"),
    (edit(lambda d: d["ops"][3].update(outputs=[1, 4])), "redefines tensor id 1"),
    (
        edit(lambda d: d["ops"][3].update(block_graph=[])),
        r"ops\[3\] \(customized\)\.block_graph must",
    ),
    (edit(lambda d: d["ops"][3]["block_graph"].update(grid=[2, 1])), "grid' must have 3 entries"),
    (edit(lambda d: d["ops"][3]["block_graph"].update(forloop_range=3)), "does not divide"),
    (
        edit(lambda d: block_op(d, 0).update(shape=[3, 16])),
        r"block_graph\.ops\[0\] \(input\): .*does not divide",
    ),
    (edit(lambda d: block_op(d, 3).update(inputs=[0])), r"block_graph\.ops\[3\] \(matmul\) has 1"),
    (
        edit(lambda d: block_op(d, 4).update(kind="accum_sum")),
        r"block_graph\.ops\[4\] \(accum_sum\) has 2 inputs, expected 1",
    ),
    (edit(lambda d: block_op(d, -1).update(omap=[-1, -1, -1])), "cross-block reduction"),
    (edit(lambda d: d["ops"][-1].update(inputs=[])), r"\(output\) has 0 inputs, expected 1"),
]


@pytest.mark.parametrize("text, fragment", MALFORMED)
def test_malformed_json_raises_value_error(text, fragment):
    with pytest.raises(ValueError, match=fragment) as info:
        mj.KernelGraph.from_json(text)
    assert str(info.value).startswith("from_json: ")


def test_from_json_wants_text():
    with pytest.raises(TypeError, match="expected a JSON string"):
        mj.KernelGraph.from_json({"format": "mirage_jax.kernel_graph"})

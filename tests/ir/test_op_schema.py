"""_core.op_schema(): the C++ op table (cc/ir/ops.def) as the Python side sees it. Every op
the table names has its builder on the graph classes of the levels where it is legal."""

import mirage_jax as mj
from mirage_jax import _core

BUILDER_CLASSES = {
    "unary",
    "binary",
    "matmul",
    "reduce",
    "rms_norm",
    "concat",
    "accum",
    "accum_last",
    "accum_matmul",
}


def test_names_are_unique_and_in_table_order():
    names = [row["name"] for row in _core.op_schema()]
    assert len(names) == len(set(names))
    # the first rows are the ones the content hashes were written with
    assert names[:4] == ["input", "output", "exp", "square"]
    assert names.index("add") < names.index("matmul") < names.index("accum_sum")


def test_every_op_has_its_builder_where_it_is_legal():
    for row in _core.op_schema():
        if row["class"] not in BUILDER_CLASSES:
            continue
        for level, cls in (("kernel", mj.KernelGraph), ("block", mj.BlockGraph)):
            assert hasattr(cls, row["name"]) == (level in row["levels"]), (row, level)


def test_rows_describe_the_ops():
    rows = {row["name"]: row for row in _core.op_schema()}
    assert rows["exp"] == {
        "name": "exp",
        "arity": 1,
        "levels": ["kernel", "block"],
        "class": "unary",
        "attribute": "none",
        "flops": 1,
    }
    assert rows["mul_scalar"]["attribute"] == "scalar"
    assert rows["rms_norm"]["attribute"] == "eps"
    assert rows["reduce"]["attribute"] == "dim_reduce"
    assert rows["customized"]["arity"] is None and rows["customized"]["levels"] == ["kernel"]
    assert rows["accum_exp_matmul"] == {
        "name": "accum_exp_matmul",
        "arity": 2,
        "levels": ["block"],
        "class": "accum_matmul",
        "attribute": "none",
        "flops": 2,
    }

"""benchmarks/schedule_variants.py: a stored kernel recut over other grids and for-loops
computes what it computed, a cut the stored kernel cannot take is refused by name, and the
command times every variant beside the model's estimate and XLA's run of the program."""

import json

import jax
import numpy as np
import pytest
from benchmark_support import import_benchmarks
from kernel_test_support import assert_float32_product

import mirage_jax as mj
from mirage_jax.ir.product_graphs import column_split_product

(variants_tool,) = import_benchmarks("schedule_variants")

M, K, N = 4, 64, 32

# A calibration as ranking_replay.py collect stores one (the Intel development machine's).
CALIBRATION = {
    "cores": 2,
    "last_level_cache_bytes": 314572800,
    "dram_bandwidth": 5.66e10,
    "generated_flops": 3.94e11,
    "generated_bf16_flops": 2.05e12,
    "generated_f32_bf16_flops": 7.85e11,
    "peak_flops": 4.04e11,
    "library_small_m_matmul_flops": 1.17e11,
    "library_small_m_bandwidth": 1.23e10,
    "split_stream_bandwidth": 4.67e10,
    "custom_call_overhead_s": 0.0,
    "block_overhead_s": 0.0,
    "run_overhead_s": 3.9e-08,
    "page_walk_s": 0.0,
}


def stored_row() -> dict:
    graph = column_split_product(M, K, N, blocks=4, k_tile=16)
    return dict(program="gemv", label="c0", graph=graph.to_json(), median_s=1e-3, estimate_s=1e-3)


def test_each_variant_computes_the_product():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((K, N), dtype=np.float32)
    x[0, :] = 0.0
    x[1, :] = 1e4  # large partial sums: a step summed twice or dropped shows
    graphs = variants_tool.variants(stored_row(), [(1,), (2,), (8,)], [1, 4, 16], kernel=0)
    assert len(graphs) == 1 + 3 * 3
    cut = json.loads(graphs["grid 8, forloop 16"].to_json())
    block_graph = next(op for op in cut["ops"] if op["kind"] == "customized")["block_graph"]
    assert block_graph["grid"] == [8, 1, 1] and block_graph["forloop_range"] == 16
    whole = json.loads(graphs["grid 1, forloop 1"].to_json())
    whole_bg = next(op for op in whole["ops"] if op["kind"] == "customized")["block_graph"]
    assert all(
        m == [-1, -1, -1] for op in whole_bg["ops"] for m in (op.get("imap"), op.get("omap")) if m
    )
    for name, graph in graphs.items():
        (got,) = jax.jit(mj.compile(graph))(x, w)
        assert_float32_product(np.asarray(got), "mk,kn->mn", x, w, name)


def test_a_cut_the_stored_kernel_cannot_take_is_refused_by_name():
    row = stored_row()
    with pytest.raises(ValueError, match="grid axis 1 of size 2: the stored kernel splits nothing"):
        variants_tool.schedule_variant(row["graph"], (4, 2))
    with pytest.raises(ValueError, match="does not divide"):
        variants_tool.schedule_variant(row["graph"], (3,))
    with pytest.raises(ValueError, match="forloop 5"):
        variants_tool.schedule_variant(row["graph"], (4,), forloop=5)
    with pytest.raises(ValueError, match="no kernel 1"):
        variants_tool.schedule_variant(row["graph"], (4,), kernel=1)


def reference_graph() -> mj.KernelGraph:
    """x @ w as one kernel-level matmul: what XLA runs."""
    kg = mj.KernelGraph()
    x, w = kg.new_input((M, K)), kg.new_input((K, N))
    kg.mark_output(kg.matmul(x, w))
    return kg


def test_the_command_times_every_variant_beside_xla(tmp_path, capsys):
    path = tmp_path / "stored.json"
    doc = dict(calibration=CALIBRATION, candidates=[stored_row()])
    doc["references"] = {"gemv": reference_graph().to_json()}
    path.write_text(json.dumps(doc))
    argv = [str(path), "gemv", "c0", "--grids", "2,8", "--forloops", "4"]
    variants_tool.main([*argv, "--time-budget", "0.2", "--repeat", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[0].strip() for line in lines] == [
        "stored",
        "grid 2, forloop 4",
        "grid 8, forloop 4",
        "xla",
    ]
    assert all(" model " in line and line.endswith("x XLA") for line in lines[:3])
    assert " model " not in lines[3]
    # a file stored before collect kept references, of a program search_reach does not
    # build: the variants alone
    path.write_text(json.dumps(dict(calibration=CALIBRATION, candidates=[stored_row()])))
    variants_tool.main([str(path), "gemv", "c0", "--grids", "2", "--time-budget", "0.2"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and not any("XLA" in line for line in lines)
    with pytest.raises(SystemExit, match="no candidate c9 of gemv"):
        variants_tool.main([str(path), "gemv", "c9", "--grids", "2"])
    with pytest.raises(SystemExit, match="splits nothing"):
        variants_tool.main([str(path), "gemv", "c0", "--grids", "2x2"])
    with pytest.raises(SystemExit):
        variants_tool.main([str(path), "gemv", "c0", "--grids", "2", "--repeat", "0"])
    assert "takes a positive number, got '0'" in capsys.readouterr().err

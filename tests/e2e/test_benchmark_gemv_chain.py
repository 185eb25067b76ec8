"""benchmarks/gemv_chain.py --quick: each row count reports per-product times of the chained
kernels, XLA's chained dots, the one-block kernels and each product alone, with rates and
ratios that follow from them; bad arguments are refused by name."""

import json

import pytest
from benchmark_support import run_benchmark

TIMED = (
    "kernels, chained",
    "XLA, chained",
    "one-block kernels, chained",
    "kernel, alone",
    "XLA, alone",
)


def _run(*args, timeout=600):
    return run_benchmark("gemv_chain.py", *args, timeout=timeout)


@pytest.fixture(scope="module")
def quick_rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("gemv_chain") / "rows.json"
    done = _run("--quick", "--rows", "1,3", "--json", str(out))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(out.read_text())


def test_every_row_count_reports_each_function(quick_rows):
    assert [r["rows"] for r in quick_rows] == [1, 3]
    for row in quick_rows:
        for name in TIMED:
            assert row[name]["ms_per_product"] > 0, (row["rows"], name)
            bytes_per_weight = row["k"] * row["n"] * 4
            rate = bytes_per_weight / (row[name]["ms_per_product"] / 1e3) / 1e9
            assert rate == pytest.approx(row[name]["gb_s"]), (row["rows"], name)
            flops = 2 * row["rows"] * row["k"] * row["n"] / (row[name]["ms_per_product"] / 1e3)
            assert flops / 1e9 == pytest.approx(row[name]["gflop_s"]), (row["rows"], name)


def test_a_warm_run_reports_the_same_fields(tmp_path):
    out = tmp_path / "warm.json"
    done = _run("--quick", "--warm", "--rows", "8", "--json", str(out))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "weights warm" in done.stdout
    (row,) = json.loads(out.read_text())
    assert all(row[name]["gflop_s"] > 0 for name in TIMED)


def test_the_ratios_follow_from_the_times(quick_rows):
    for row in quick_rows:
        chained = row["XLA, chained"]["ms_per_product"] / row["kernels, chained"]["ms_per_product"]
        alone = row["XLA, alone"]["ms_per_product"] / row["kernel, alone"]["ms_per_product"]
        assert row["kernel over XLA, chained"] == pytest.approx(chained)
        assert row["kernel over XLA, alone"] == pytest.approx(alone)


@pytest.mark.parametrize(
    "args, named",
    [
        (["--rows", "0"], "--rows"),
        (["--rows", "one"], "--rows"),
        (["--budget", "0"], "--budget"),
        (["--k", "100", "--k-tile", "64"], "--k-tile"),
    ],
)
def test_bad_arguments_are_refused_by_name(args, named):
    done = _run(*args, timeout=120)
    assert done.returncode == 2
    assert named in done.stderr

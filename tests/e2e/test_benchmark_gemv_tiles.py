"""benchmarks/gemv_tiles.py --quick: every grid and tile height that divides the shape is
compiled, checked against XLA's dot and timed beside it; bad arguments are refused by name."""

import json

import pytest
from benchmark_support import run_benchmark


def _run(*args):
    return run_benchmark("gemv_tiles.py", *args)


def test_each_dividing_configuration_is_checked_and_timed_beside_xla(tmp_path):
    out = tmp_path / "rows.json"
    done = _run("--quick", "--blocks", "2,3", "--k-tiles", "8,64,48", "--json", str(out))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (row,) = json.loads(out.read_text())
    assert row["shape"] == [2, 64, 128]
    # 3 divides neither n=128 nor is 48 a divisor of k=64: those are left out, not run.
    assert row["configs"] == [[2, 8], [2, 64]]
    assert set(row["ms"]) == {"XLA dot", "grid 2, k_tile 8", "grid 2, k_tile 64"}
    assert all(t > 0 for t in row["ms"].values()) and row["error"] < 1e-4
    assert done.stdout.count("x the fastest") == 2


@pytest.mark.parametrize("dtype, tolerance", [("bf16", 2.0**-7), ("f32-bf16", 1e-4)])
def test_bfloat16_weights_are_checked_against_xlas_dot(tmp_path, dtype, tolerance):
    out = tmp_path / "rows.json"
    # 40 rows of x: past the 8-row streaming order, where the AMX tile unit takes them
    done = _run(
        "--quick", "--dtype", dtype, "--shapes", "40x64x64", "--blocks", "1,2",
        "--k-tiles", "32,64", "--json", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (row,) = json.loads(out.read_text())
    assert row["dtype"] == dtype and row["configs"] == [[1, 32], [1, 64], [2, 32], [2, 64]]
    assert row["error"] < tolerance and f"40, 64] @ [64, 64] {dtype}" in done.stdout


def test_bad_arguments_are_named():
    done = _run("--shapes", "8x64")
    assert done.returncode != 0 and "bad shape '8x64'" in done.stderr
    done = _run("--blocks", "2,0")
    assert done.returncode != 0 and "--blocks takes positive integers" in done.stderr
    done = _run("--quick", "--blocks", "3", "--k-tiles", "48")
    assert done.returncode != 0 and "no grid divides n=128" in done.stderr
    done = _run("--dtype", "f16")
    assert done.returncode != 0 and "invalid choice: 'f16'" in done.stderr
    done = _run("--budget", "-1")
    assert done.returncode != 0 and "--budget must be positive" in done.stderr

"""benchmarks/widened_dots.py --quick: each shape reports XLA's dot with a float32 and with a
bfloat16 weight, the widening alone and the generated product, which matches XLA's; bad
arguments are refused by name."""

import json

from benchmark_support import run_benchmark

TIMED = (
    "XLA dot, float32 weight",
    "XLA dot, bfloat16 weight",
    "widening alone",
    "generated product, bfloat16 weight",
)


def _run(*args):
    return run_benchmark("widened_dots.py", *args)


def test_every_shape_reports_each_function_and_a_matching_product(tmp_path):
    out = tmp_path / "rows.json"
    done = _run("--quick", "--shapes", "8x64x128,4x48x96", "--json", str(out))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    rows = json.loads(out.read_text())
    assert [r["shape"] for r in rows] == [[8, 64, 128], [4, 48, 96]]
    for row in rows:
        assert set(row["ms"]) == set(TIMED) and all(t > 0 for t in row["ms"].values())
        assert row["error"] < 1e-4 and row["rounds"] > 0
    assert done.stdout.count("generated vs XLA error") == 2


def test_bad_arguments_are_named():
    done = _run("--shapes", "8x64")
    assert done.returncode != 0 and "bad shape '8x64'" in done.stderr
    done = _run("--budget", "0")
    assert done.returncode != 0 and "--budget must be positive" in done.stderr

"""benchmarks/switch_cost.py --quick: a product's generated kernel and XLA's dot report their
times for every turn length asked, and bad arguments are refused by name."""

import json

from benchmark_support import run_benchmark


def _run(*args):
    return run_benchmark("switch_cost.py", *args)


def test_each_turn_length_reports_both_functions(tmp_path):
    out = tmp_path / "rows.json"
    done = _run("--quick", "--stretches", "1,2", "--json", str(out))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (result,) = json.loads(out.read_text())
    assert [r["stretch"] for r in result["rows"]] == [1, 2]
    for row in result["rows"]:
        assert set(row["ms"]) == {"kernel", "XLA"} and all(t > 0 for t in row["ms"].values())
    assert done.stdout.count("XLA / kernel") == 2


def test_bad_arguments_are_named(tmp_path):
    done = _run("--stretches", "0,2")
    assert done.returncode != 0 and "takes positive integers" in done.stderr
    done = _run("--calls", "1")
    assert done.returncode != 0 and "--calls must be at least 2" in done.stderr
    done = _run("--replay", str(tmp_path / "none.json"))
    assert done.returncode != 0 and "--replay needs --only" in done.stderr

"""benchmarks/switch_cost.py --quick: a product's generated kernel and XLA's dot report their
times for every turn length asked, and bad arguments and files are refused by name."""

import json
import re

import numpy as np
import pytest
from benchmark_support import import_benchmarks, run_benchmark

(switch_cost,) = import_benchmarks("switch_cost")


def test_each_turn_length_reports_both_functions(tmp_path):
    out = tmp_path / "rows.json"
    done = run_benchmark("switch_cost.py", "--quick", "--stretches", "1,2", "--json", str(out))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (result,) = json.loads(out.read_text())
    assert [r["stretch"] for r in result["rows"]] == [1, 2]
    for row in result["rows"]:
        assert set(row["ms"]) == {"kernel", "XLA"} and all(t > 0 for t in row["ms"].values())
    assert done.stdout.count("XLA / kernel") == 2


def test_bad_arguments_are_named(tmp_path):
    refusals = {
        ("--stretches", "0,2"): "takes positive integers",
        ("--calls", "1"): "--calls must be at least 2",
        ("--replay", str(tmp_path / "none.json")): "--replay needs --only",
        ("--replay", str(tmp_path / "none.json"), "--only", "lora"): "cannot read",
    }
    for args, message in refusals.items():
        done = run_benchmark("switch_cost.py", *args)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr[-2000:])


def test_a_kernel_off_xla_is_refused_before_it_is_timed():
    want = np.linspace(-3.0, 3.0, 12, dtype=np.float32)
    same = {"kernel": lambda x: (x * 1.0,), "XLA": lambda x: (x,)}
    switch_cost.check_outputs("same", same, [want])  # passes: equal outputs
    off = {"kernel": lambda x: (x * 1.01,), "XLA": lambda x: (x,)}
    with pytest.raises(SystemExit, match=re.escape("off XLA's result by 1.00e-02")):
        switch_cost.check_outputs("off", off, [want])

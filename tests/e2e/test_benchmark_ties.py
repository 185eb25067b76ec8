"""benchmarks/ties.py --quick: the candidates the cost model ties are timed, each with its
model cost and cut_row_bytes, and both orders (the model's, superoptimize's tie order) are
permutations of them whose reported place of the fastest and first-over-fastest ratio agree
with the measured times."""

import json
import subprocess
import sys

import pytest
from benchmark_support import BENCHMARKS, import_benchmarks

(ties,) = import_benchmarks("ties")


@pytest.fixture(scope="module")
def quick_rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("ties") / "ties.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "ties.py"), "--quick", "--budget", "2", "--max", "4"]
        + ["--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(out.read_text())


def test_every_quick_program_reports_its_tied_candidates(quick_rows):
    assert [r["name"] for r in quick_rows] == [p.name for p in ties.QUICK]
    for row in quick_rows:
        candidates = row["candidates"]
        assert 1 <= len(candidates) <= 4, row["name"]
        best = min(c["cost_ms"] for c in candidates)
        for c in candidates:
            assert c["measured_ms"] > 0 and c["cut_row_bytes"] >= 0, row["name"]
            assert c["cost_ms"] <= best * (1 + ties.contenders.COST_TIE) + 1e-12, row["name"]
            assert c["structure"].startswith("grid ("), row["name"]


def test_both_orders_are_permutations_and_their_figures_follow_the_times(quick_rows):
    for row in quick_rows:
        times = [c["measured_ms"] for c in row["candidates"]]
        fastest = times.index(min(times))
        for label in ("model", "ties"):
            order = row[f"{label}_order"]
            assert sorted(order) == list(range(len(times))), row["name"]
            assert row[f"fastest_in_{label}_order"] == order.index(fastest) + 1
            ratio = times[order[0]] / times[fastest]
            assert row[f"{label}_first_over_fastest"] == pytest.approx(ratio, rel=1e-6)


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--only", "no_such_program"], "unknown programs ['no_such_program']"),
        (["--max", "0"], "--max must be at least 1"),
        (["--budget", "0"], "--budget must be positive"),
    ],
)
def test_bad_arguments_are_refused_by_name(argv, named, capsys):
    with pytest.raises(SystemExit):
        ties.main(["--quick", *argv])
    assert named in capsys.readouterr().err

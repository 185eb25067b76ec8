"""benchmarks/ranking_replay.py: stored candidates re-ranked under their stored calibration give
the estimates they were collected with, and re-timed ones keep their graphs."""

import json

import pytest
from benchmark_support import import_benchmarks

import mirage_jax as mj
from mirage_jax.ir import paper_graphs as pg

replay, ranking = import_benchmarks("ranking_replay", "ranking")


def small_rmsnorm_linear():
    return pg.rmsnorm_linear(batch=2, hidden=64, out_features=32, col_tile=4, k_tile=4)


@pytest.fixture(scope="module")
def collected():
    lines = []
    doc = replay.collect([("rmsnorm", small_rmsnorm_linear)], 1.0, 3, 0.2, log=lines.append)
    return json.loads(json.dumps(doc)), lines


def test_collect_stores_distinct_timed_candidates_and_the_paper_graph(collected):
    doc, lines = collected
    rows = doc["candidates"]
    labels = [r["label"] for r in rows]
    assert "paper" in labels and 2 <= len(rows) <= 4 and len(set(labels)) == len(labels)
    assert len({r["graph"] for r in rows}) == len(rows)
    assert all(r["median_s"] > 0 and r["estimate_s"] > 0 for r in rows)
    reference, paper = small_rmsnorm_linear()
    assert next(r["graph"] for r in rows if r["label"] == "paper") == paper.to_json()
    assert doc["references"] == {"rmsnorm": reference.to_json()}
    assert lines[0].startswith("rmsnorm: timing")


def test_rank_under_the_stored_calibration_gives_the_collected_estimates(collected, tmp_path):
    doc, _ = collected
    target = replay.Calibration.from_json(doc["calibration"]).target()
    lines = []
    ((figures, costs),) = replay.rank(doc, target, log=lines.append).values()
    assert costs == {r["label"]: r["estimate_s"] for r in doc["candidates"]}
    timings = {r["label"]: r["median_s"] for r in doc["candidates"]}
    assert figures == ranking.ranking(costs, timings)
    assert lines[-1].startswith("cost model:")
    # the stored calibration is the one read: another one costs them otherwise
    slower = dict(doc, calibration=dict(doc["calibration"], dram_bandwidth=1e9, cores=1))
    target = replay.Calibration.from_json(slower["calibration"]).target()
    ((_, slower_costs),) = replay.rank(slower, target, log=lines.append).values()
    assert all(slower_costs[n] > costs[n] for n in costs), (slower_costs, costs)
    # the same through the command line, from a file
    path = tmp_path / "cands.json"
    path.write_text(json.dumps(doc))
    replay.main(["rank", str(path), "--only", "rmsnorm"])


def test_retime_measures_the_same_graphs_again(collected, tmp_path):
    doc, _ = collected
    again = replay.retime(doc, 0.2, log=lambda _: None)
    assert [(r["label"], r["graph"]) for r in again["candidates"]] == [
        (r["label"], r["graph"]) for r in doc["candidates"]
    ]
    assert all(r["median_s"] > 0 for r in again["candidates"])
    assert again["calibration"] == doc["calibration"]
    graph = mj.KernelGraph.from_json(again["candidates"][0]["graph"])
    assert graph.to_json() == again["candidates"][0]["graph"]


def stored(times_ms):
    rows = [
        dict(program="p", label=f"c{i}", graph=f"g{i}", median_s=t * 1e-3)
        for i, t in enumerate(times_ms)
    ]
    return dict(calibration={}, candidates=rows)


def test_a_timing_repeated_exactly_ranks_perfectly_and_reversed_worst():
    first = stored([1.0, 2.0, 3.0, 4.0])
    ((same),) = replay.repeatability(first, first, log=lambda _: None).values()
    assert same.spearman == pytest.approx(1) and same.fastest_rank == 1 and same.regret == 1
    ((flipped),) = replay.repeatability(
        first, stored([4.0, 3.0, 2.0, 1.0]), log=lambda _: None
    ).values()
    assert flipped.spearman == pytest.approx(-1) and flipped.fastest_rank == 4
    assert flipped.regret == pytest.approx(4.0)
    # only the graphs timed both times count
    second = stored([1.0, 2.0, 3.0, 4.0])
    second["candidates"][3]["graph"] = "another"
    ((three),) = replay.repeatability(first, second, log=lambda _: None).values()
    assert three.candidates == 3


def test_a_file_without_stored_candidates_is_named(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"rows": []}))
    with pytest.raises(SystemExit, match="holds no stored candidates"):
        replay.main(["rank", str(path)])
    with pytest.raises(SystemExit, match="cannot read"):
        replay.main(["repeat", str(tmp_path / "missing.json"), str(path)])


def test_unknown_programs_are_named():
    with pytest.raises(SystemExit, match="unknown programs: \\['nope'\\]"):
        replay.main(["collect", "unused.json", "--only", "lora,nope"])


@pytest.mark.parametrize("ratio", ["0", "1.5", "-0.2", "nan", "fast"])
def test_a_split_ratio_outside_zero_to_one_is_named(ratio, capsys):
    with pytest.raises(SystemExit):
        replay.main(["rank", "unused.json", "--split-ratio", ratio])
    assert f"takes a number in (0, 1], got {ratio!r}" in capsys.readouterr().err


def test_stored_calibrations_rank_with_the_rates_they_hold(collected):
    """The bfloat16-weight rates come from the stored calibration; a calibration stored before
    they were measured, or --flat-bf16, ranks without them (every generated flop at the
    float32 rate, as the model did then)."""
    doc, _ = collected
    stored = dict(doc["calibration"], generated_bf16_flops=3e12, generated_f32_bf16_flops=1e12)
    target = replay.stored_target(stored)
    assert (target.generated_bf16_flops, target.generated_f32_bf16_flops) == (3e12, 1e12)
    flat = replay.stored_target(stored, flat_bf16=True)
    assert (flat.generated_bf16_flops, flat.generated_f32_bf16_flops) == (0.0, 0.0)
    older = {
        k: v for k, v in stored.items() if not k.startswith("generated_") or k == "generated_flops"
    }
    old = replay.stored_target(older)
    assert (old.generated_bf16_flops, old.generated_f32_bf16_flops) == (0.0, 0.0)
    assert old.generated_flops == target.generated_flops == stored["generated_flops"]
    # one stored before the split stream was measured streams split kernels at
    # dram_bandwidth, as the model did then; --split-ratio gives them a share of it
    assert target.split_stream_bandwidth == stored["split_stream_bandwidth"]
    without_split = {k: v for k, v in stored.items() if k != "split_stream_bandwidth"}
    assert replay.stored_target(without_split).split_stream_bandwidth == stored["dram_bandwidth"]
    halved = replay.stored_target(without_split, split_ratio=0.5)
    assert halved.split_stream_bandwidth == 0.5 * stored["dram_bandwidth"]
    # the bfloat16 prefill programs are bfloat16 throughout
    for _, build in replay.CASE_SETS["bf16-prefill"]:
        reference, _ = build()
        assert {str(t.dtype) for t in reference.inputs} == {"bfloat16"}

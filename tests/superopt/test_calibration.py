"""The CPU cost model's calibration: probes that run on this machine, numbers kept once per
machine in the cache, the search's ranking made with them, and numbers that cannot rank
refused with the field named."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

import mirage_jax as mj
from mirage_jax import _core
from mirage_jax.cache import store
from mirage_jax.cli.main import main as cli_main
from mirage_jax.ir import paper_graphs as pg
from mirage_jax.ir.product_graphs import fitting_blocks
from mirage_jax.superopt import calibration, calibration_cache, search_cache

FAKE = calibration.Calibration(
    cores=2,
    last_level_cache_bytes=32 << 20,
    dram_bandwidth=10e9,
    generated_flops=20e9,
    generated_bf16_flops=80e9,
    generated_f32_bf16_flops=30e9,
    peak_flops=150e9,
    library_small_m_matmul_flops=40e9,
    library_small_m_bandwidth=3e9,
    split_stream_bandwidth=9e9,
    custom_call_overhead_s=3e-6,
    block_overhead_s=1e-7,
    run_overhead_s=0.0,
    page_walk_s=0.0,
)


@pytest.fixture
def measured(monkeypatch, tmp_path):
    """Calibration on, in a fresh cache root, with the probes replaced by FAKE (whatever is
    measured is appended to the returned list)."""
    monkeypatch.setenv(calibration_cache.ENV, "1")
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path))
    monkeypatch.setattr(calibration_cache, "_measured", {})
    monkeypatch.setattr(calibration_cache, "_failed", {})
    calls: list[calibration.Calibration] = []
    answers = [FAKE]

    def fake_measure(log=lambda _: None):
        calls.append(answers[0])
        return answers[0]

    monkeypatch.setattr(calibration, "measure", fake_measure)
    return calls, answers


def small_rmsnorm_linear():
    return pg.rmsnorm_linear(batch=8, hidden=512, out_features=768)[0]


def test_the_probes_run_and_measure_usable_numbers():
    found = calibration.measure()
    assert found.cores == calibration.usable_cores()
    # Wide bounds: any machine that runs the kernels at all lands inside them; a probe that
    # failed to run, or timed nothing, does not.
    assert 1e8 < found.dram_bandwidth < 1e13
    assert 1e8 < found.generated_flops < 1e14
    assert 1e8 < found.generated_bf16_flops < 1e15
    assert 1e8 < found.generated_f32_bf16_flops < 1e15
    assert 1e8 < found.peak_flops < 1e14
    assert 1e7 < found.library_small_m_matmul_flops < 1e14
    assert 1e8 < found.library_small_m_bandwidth < 1e13
    assert 1e8 < found.split_stream_bandwidth < 1e13
    assert 0 <= found.custom_call_overhead_s < 1e-2
    assert 0 <= found.block_overhead_s < 1e-3
    assert 0 <= found.run_overhead_s < 1e-6 and 0 <= found.page_walk_s < 1e-6
    target = found.target()
    assert (target.dram_bandwidth, target.generated_flops, target.generated_bf16_flops) == (
        found.dram_bandwidth,
        found.generated_flops,
        found.generated_bf16_flops,
    )
    assert target.generated_f32_bf16_flops == found.generated_f32_bf16_flops
    assert target.split_stream_bandwidth == found.split_stream_bandwidth


@pytest.mark.parametrize("cores", [1, 2, 3, 5, 6, 8, 12])
def test_the_probes_are_built_for_any_number_of_cores(cores):
    """A grid that does not divide a probe's columns is an error, and so is a split over a
    grid of 1: on 1, 3 or 6 cores every calibration failed and the model ranked with its
    presets. Each probe now takes a block per
    core where the columns split so, else the most blocks that do."""
    n_stream = calibration._stream_columns(32 << 20)
    kernels = calibration.probe_kernels(cores, n_stream)
    most = max(b for b in range(1, cores + 1) if n_stream % b == 0)
    for name in ("stream", "whole rows", "line runs"):
        assert f"grid=({most}, 1, 1)" in str(kernels[name]), name
    weight = max(b for b in range(1, cores + 1) if 1024 % b == 0)
    assert f"grid=({weight}, 1, 1)" in str(kernels["bf16 weight"])
    assert "float32" in str(kernels["f32 x bf16 weight"]).split("\n")[1]


def test_fitting_blocks_is_the_most_that_divide():
    assert [fitting_blocks(1024, w) for w in (0, 1, 3, 6, 12, 4096)] == [1, 1, 2, 4, 8, 1024]
    assert fitting_blocks(96, 5) == 4 and fitting_blocks(7, 6) == 1


def test_the_compute_probes_are_timed_in_alternating_stretches(monkeypatch):
    """The generated kernels' flop rate and XLA's come from alternating stretches of calls:
    timed one after the other, a slow stretch of the machine fell on one of them alone (one
    machine stored 98, 142 and 194 GFLOP/s for the same probe within an hour)."""
    rounds: list[set[str]] = []
    timed = calibration.fastest_seconds_each

    def recording(functions, args, runs=3, **kwargs):
        rounds.append(set(functions))
        return timed(functions, args, runs, **kwargs)

    monkeypatch.setattr(calibration, "fastest_seconds_each", recording)
    found = calibration.measure(rounds=1)
    stretched = {"compute", "bf16 weight", "f32 x bf16 weight", "library"}
    assert any(stretched <= names for names in rounds), rounds
    assert 1e8 < found.generated_flops < 1e14 and 1e8 < found.peak_flops < 1e14


def test_each_figure_comes_from_its_probes(monkeypatch):
    """The figures from fixed probe times: the split stream is the one-row stream's bandwidth
    times the 8-row stream's time over the 8-row strips' (a wrong pairing, the 1-row strips
    say, gives another number), and XLA's small-M stream reads the streamed W. The streams
    are medians over calls that take W's copies in turn (a stream's fastest call found part
    of W in the cache: 62 GB/s where the median was 37); the split's ratio and the rest are
    fastest calls (cold medians put the ratio at 0.99-1.04, its sign flipping)."""
    times = {
        "stream": 2e-3, "strips": 2.1e-3, "page walks": 2.5e-3,
        "stream, 8 rows": 4e-3, "strips, 8 rows": 5e-3, "xla": 6e-3,
        "whole rows": 3e-3, "line runs": 3.5e-3,
        "one block": 10e-6, "many blocks": 12e-6,
        "compute": 1e-3, "bf16 weight": 1e-4, "f32 x bf16 weight": 2e-4, "library": 1e-3,
    }  # fmt: skip
    streams = {"stream", "strips", "page walks"}
    medians_of: list[tuple[set[str], list]] = []

    fastest_of: list[set[str]] = []

    def each(functions, args, runs=3, **kwargs):
        assert not streams & set(functions), "a stream timed by its fastest call"
        fastest_of.append(set(functions))
        return {name: (8e-6 if name == "xla" else times[name]) for name in functions}

    def medians(functions, args, budget_s, arg_sets):
        medians_of.append((set(functions), arg_sets))
        return {name: times[name] for name in functions}, 5

    def one(function, args, runs=3):
        assert args[0].shape == (8, 2048), "XLA's small-M stream timed by its fastest call"
        return 2e-4

    monkeypatch.setattr(calibration, "fastest_seconds_each", each)
    monkeypatch.setattr(calibration, "median_times", medians)
    monkeypatch.setattr(calibration, "fastest_seconds", one)
    n = 1024
    copies = [np.full((calibration._STREAM_K, n), i, np.float32) for i in range(3)]
    x1 = np.zeros((1, calibration._STREAM_K), np.float32)
    x8 = np.zeros((8, calibration._STREAM_K), np.float32)
    inputs = {name: [] for name in ("compute", "bf16 weight", "f32 x bf16 weight")}
    inputs.update({"stream": [x1, copies[0]], "whole rows": [], "one block": []})
    inputs["stream, 8 rows"] = [x8, copies[0]]
    inputs["stream copies"] = copies
    fns = {name: (lambda *a: None) for name in times}
    found = calibration._timed(2, 32 << 20, n, fns, inputs, np.random.default_rng(0))
    stream_bytes = 4.0 * calibration._STREAM_K * n
    assert found.dram_bandwidth == pytest.approx(stream_bytes / 2e-3)
    assert found.split_stream_bandwidth == pytest.approx(stream_bytes / 2e-3 * 4e-3 / 5e-3)
    assert found.library_small_m_bandwidth == pytest.approx(stream_bytes / 6e-3)
    assert found.page_walk_s == pytest.approx(0.4e-3 * 2 / (calibration._STREAM_K * 64))
    assert found.custom_call_overhead_s == pytest.approx(2e-6)
    timed = {frozenset(names): sets for names, sets in medians_of}
    assert set(timed) == {
        frozenset({"stream", "strips", "page walks"}),
        frozenset({"xla"}),
    }
    assert {"stream, 8 rows", "strips, 8 rows"} in fastest_of
    for names, sets in timed.items():
        rows = 8 if "xla" in names else 1
        assert [s[1] for s in sets] == copies, names  # every copy of W, in turn
        assert all(s[0].shape == (rows, calibration._STREAM_K) for s in sets), names


def test_each_figure_is_its_median_over_the_rounds():
    """A round the machine favoured in one figure (a stream partly in the caches) and a round
    slowed in another (XLA's small product) leave the median of each figure alone."""
    fields = {f.name: getattr(FAKE, f.name) for f in dataclasses.fields(calibration.Calibration)}
    favoured = calibration.Calibration(**{**fields, "dram_bandwidth": 55e9})
    slowed = calibration.Calibration(**{**fields, "library_small_m_matmul_flops": 1e9})
    assert calibration.median_of([favoured, FAKE, slowed]) == FAKE
    assert calibration.median_of([slowed]) == slowed
    with pytest.raises(ValueError, match="no calibrations"):
        calibration.median_of([])


def test_the_calibration_is_measured_once_and_kept(measured):
    calls, _ = measured
    first = calibration_cache.load_or_measure()
    calibration_cache._measured.clear()  # as a new process would start
    again = calibration_cache.load_or_measure()
    assert first == again == FAKE
    assert len(calls) == 1
    assert calibration_cache.location().is_file()


def test_other_probes_measure_again(measured, monkeypatch):
    """A calibration stored by other probes (calibration.py changed, same version and core)
    is not the one this code would measure: the split stream's figure once came from one row
    of x, and a stored one kept ranking with it."""
    calls, answers = measured
    calibration_cache.load_or_measure()
    calibration_cache._measured.clear()
    monkeypatch.setattr(calibration_cache.machine, "calibration_code_digest", lambda: "other")
    answers[0] = dataclasses.replace(FAKE, split_stream_bandwidth=8e9)
    assert calibration_cache.load_or_measure().split_stream_bandwidth == 8e9
    assert len(calls) == 2


def test_a_process_ranks_by_one_calibration_across_cache_roots(measured, monkeypatch, tmp_path):
    calls, answers = measured
    first = calibration_cache.load_or_measure()
    calibration_cache._measured.clear()  # a new process, which loads the stored one
    assert calibration_cache.load_or_measure() == first
    answers[0] = dataclasses.replace(FAKE, dram_bandwidth=2 * FAKE.dram_bandwidth)
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "another root"))
    assert calibration_cache.load_or_measure() == first  # stored there, not measured again
    assert len(calls) == 1
    assert calibration_cache.stored_record()[0] == first


def test_a_damaged_calibration_is_measured_again(measured):
    calls, _ = measured
    calibration_cache.load_or_measure()
    calibration_cache.location().write_text('{"calibration": {"cores": 2}}')
    calibration_cache._measured.clear()
    assert calibration_cache.load_or_measure() == FAKE
    assert len(calls) == 2
    assert calibration_cache.stored_record() is not None


def test_the_search_ranks_with_this_machines_calibration(measured):
    graph = small_rmsnorm_linear()
    config = mj.SearchConfig(time_budget_s=20, max_kernel_ops=1, max_block_ops=5, threads=2)
    result = mj.search(graph, config, progress=False)
    assert len(result.candidates) > 1
    calibrated, preset = FAKE.target(), calibration_cache.preset_target()
    for candidate, cost in zip(result.candidates, result.costs, strict=True):
        assert cost == pytest.approx(_core.estimate_cost(candidate._core, calibrated)[0])
    # The fake machine's memory and generated loops are far slower than the presets', so
    # the check above is not one the presets would pass too: together the estimates differ.
    # One by one some agree by chance: a tile of 12 columns in 64 blocks costs the fake
    # machine its arithmetic (a quarter of its vector lanes empty) and the presets their
    # per-run overhead, alike within 4%.
    presets = sum(_core.estimate_cost(c._core, preset)[0] for c in result.candidates)
    assert sum(result.costs) > 1.3 * presets, (sum(result.costs), presets)


def test_search_results_are_kept_per_calibration(measured):
    _, answers = measured
    graph, config = small_rmsnorm_linear(), mj.SearchConfig()
    before = search_cache.search_key(graph, config, "cpu")
    answers[0] = dataclasses.replace(FAKE, dram_bandwidth=2 * FAKE.dram_bandwidth)
    calibration_cache.load_or_measure(remeasure=True)
    assert search_cache.search_key(graph, config, "cpu") != before


def test_with_calibration_off_the_presets_take_this_machines_cores(monkeypatch, measured):
    calls, _ = measured
    monkeypatch.setenv(calibration_cache.ENV, "0")
    target, parts = calibration_cache.cpu_target()
    assert target.cores == calibration.usable_cores()
    assert target.dram_bandwidth == _core.Target.cpu_host().dram_bandwidth
    assert parts["presets"] is True
    assert calls == []


@pytest.mark.parametrize(
    "field, value",
    [
        ("dram_bandwidth", 0.0),
        ("generated_flops", math.nan),
        ("peak_flops", math.inf),
        ("custom_call_overhead_s", -1e-6),
    ],
)
def test_numbers_that_cannot_rank_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        dataclasses.replace(FAKE, **{field: value})


def test_a_stored_calibration_missing_a_field_is_refused():
    doc = FAKE.to_json()
    del doc["generated_flops"]
    with pytest.raises(ValueError, match="generated_flops"):
        calibration.Calibration.from_json(doc)


def test_the_core_refuses_a_target_with_a_nan_overhead():
    target = FAKE.target()
    target.block_overhead_s = math.nan
    with pytest.raises(ValueError, match="overheads"):
        target.check()


def test_the_cli_measures_once_then_shows_the_stored_numbers(measured, capsys):
    calls, _ = measured
    assert cli_main(["calibrate"]) == 0
    assert cli_main(["calibrate"]) == 0
    out = capsys.readouterr().out
    assert out.count("measuring this machine") == 1
    assert "memory 10.0 GB/s (9.0 split over more blocks), generated kernels 20 GFLOP/s" in out
    assert len(calls) == 1


def test_a_calibration_that_cannot_be_measured_ranks_with_the_presets(monkeypatch, measured):
    def no_compiler(log=lambda _: None):
        raise RuntimeError("g++ not found")

    monkeypatch.setattr(calibration, "measure", no_compiler)
    with pytest.warns(RuntimeWarning, match="could not be calibrated.*g\\+\\+ not found"):
        target, parts = calibration_cache.cpu_target()
    assert parts["presets"] is True
    assert target.dram_bandwidth == _core.Target.cpu_host().dram_bandwidth
    # not tried again in this process, and the search runs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calibration_cache.cpu_target()
    config = mj.SearchConfig(time_budget_s=10, max_kernel_ops=1, max_block_ops=5, threads=2)
    assert len(mj.search(small_rmsnorm_linear(), config, progress=False)) > 1


def test_a_function_with_its_own_cache_dir_takes_the_machines_calibration(
    measured, monkeypatch, tmp_path
):
    """The calibration is the machine's: measured once under the machine's cache root
    ($MIRAGE_JAX_CACHE), a fresh process optimizing with a cache_dir of its own (an empty
    one) takes it from there, and stores it in that cache_dir too, measuring nothing."""
    calls, answers = measured
    first = calibration_cache.load_or_measure()
    calibration_cache._measured.clear()  # a new process
    answers[0] = dataclasses.replace(FAKE, dram_bandwidth=2 * FAKE.dram_bandwidth)
    own = tmp_path / "own cache_dir"
    with store.using_cache_root(own):
        assert calibration_cache.load_or_measure() == first
        assert calibration_cache.stored_record()[0] == first
    assert len(calls) == 1


def test_a_calibration_measured_for_a_cache_dir_is_kept_for_the_machine(measured, tmp_path):
    calls, _ = measured
    with store.using_cache_root(tmp_path / "own cache_dir"):
        first = calibration_cache.load_or_measure()
    calibration_cache._measured.clear()  # a new process, on the machine's cache root
    assert calibration_cache.load_or_measure() == first
    assert calibration_cache.stored_record()[0] == first
    assert len(calls) == 1

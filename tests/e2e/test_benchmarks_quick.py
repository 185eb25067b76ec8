"""benchmarks/run.py --quick: every program of benchmarks/programs.py runs under jax.jit and
mj.optimize, and the table, the JSON and the PNG chart are written with sane numbers."""

import json
import math
import subprocess
import sys

import pytest
from benchmark_support import BENCHMARKS, import_benchmarks


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), "--quick", "--runs", "5", "--out", str(out)],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return done, out


@pytest.fixture(scope="module")
def bench_modules():
    return import_benchmarks("programs", "run")


def test_quick_run_succeeds_and_writes_three_files(quick_run):
    done, out = quick_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert (out / "results.md").stat().st_size > 0
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "results.png").stat().st_size > 10_000
    json.loads((out / "results.json").read_text())


def test_json_has_every_program_with_sane_fields(quick_run, bench_modules):
    programs, _ = bench_modules
    _done, out = quick_run
    result = json.loads((out / "results.json").read_text())
    assert result["quick"] is True and result["backend"] == "cpu" and result["runs"] == 5
    machine = result["machine"]
    assert machine["bandwidth_GBps"] > 0.1 and machine["gflops"] > 0.1
    rows = {r["name"]: r for r in result["programs"]}
    assert list(rows) == [p.name for p in programs.PROGRAMS]
    for name, r in rows.items():
        program = programs.BY_NAME[name]
        assert r["shapes"] == [list(s) for s in program.quick_shapes], name
        assert r["xla_ms"] > 0 and r["mirage_ms"] > 0, name
        assert r["speedup"] == pytest.approx(r["xla_ms"] / r["mirage_ms"]), name
        assert r["jit_of_mirage_ms"] > 0 and r["jit_of_mirage_speedup"] > 0, name
        assert r["correct"] and 0 <= r["max_rel_err"] <= result["tolerance"], name
        assert r["cold_s"] > 0 and r["warm_s"] > 0, name
        if r["kernel_regions"]:
            # the cold call searched and compiled; the warm one found both in the cache
            assert r["cold_s"] > r["warm_s"], name
        assert r["bytes"] >= sum(4 * math.prod(s) for s in program.quick_shapes), name
        assert r["flops"] > 0, name
        for key in ("xla_roofline", "mirage_roofline", "mirage_GBps", "mirage_GFLOPs"):
            assert math.isfinite(r[key]) and r[key] > 0, (name, key)
        assert 0 <= r["kernel_regions"] <= r["regions"], name
        assert isinstance(r["runs_kernels"], bool) and (
            r["kernel_regions"] or not r["runs_kernels"]
        ), name
        assert r["regions"] - r["kernel_regions"] == sum(
            n.startswith("region left to XLA") for n in r["notes"]
        ), name
    # every program has a matmul or a reduction: each yields at least one region (whether a
    # kernel wins it depends on timing, which a test cannot pin down)
    assert all(r["regions"] >= 1 for r in rows.values()), {n: r["regions"] for n, r in rows.items()}
    speedups = [r["speedup"] for r in rows.values()]
    assert result["geomean_speedup"] == pytest.approx(
        math.exp(sum(map(math.log, speedups)) / len(speedups))
    )


def test_markdown_table_has_a_row_per_program(quick_run, bench_modules):
    programs, _ = bench_modules
    _, out = quick_run
    table = (out / "results.md").read_text()
    for p in programs.PROGRAMS:
        assert f"\n| {p.name} | " in table
    assert "Geometric mean speedup" in table and "GB/s" in table
    assert "python benchmarks/run.py --quick" in table


def test_flop_counts_follow_the_jaxpr(bench_modules):
    import jax.numpy as jnp

    (roofline,) = import_benchmarks("roofline")
    x, w = jnp.ones((8, 64)), jnp.ones((64, 32))
    assert roofline.count_flops(lambda x, w: x @ w, [x, w]) == 2 * 8 * 64 * 32
    # matmul, then one flop per element of the exp; the transpose is free
    assert roofline.count_flops(lambda x, w: jnp.exp(x @ w).T, [x, w]) == 2 * 8 * 64 * 32 + 8 * 32


def test_cuda_backend_without_a_gpu_is_reported(bench_modules, tmp_path, capsys):
    import jax

    _, run = bench_modules
    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("a GPU is visible; the unavailable path cannot be exercised here")
    assert run.main(["--backend", "cuda", "--out", str(tmp_path), "--only", "lora"]) == 2
    err = capsys.readouterr().err
    assert "--backend cuda: jax sees no GPU" in err
    assert not list(tmp_path.iterdir())


def test_unknown_program_names_are_refused(bench_modules, capsys):
    _, run = bench_modules
    with pytest.raises(SystemExit):
        run.main(["--only", "lora,no_such_program"])
    assert "unknown program(s) no_such_program" in capsys.readouterr().err


def test_python_m_benchmarks_runs_from_the_repository_root(bench_modules, tmp_path):
    """`python -m benchmarks` from the checkout imports the installed mirage_jax (not the
    source folder) and reaches run.py's argument parsing."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--only", "no_such_program", "--out", str(tmp_path)],
        cwd=BENCHMARKS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unknown program(s) no_such_program" in done.stderr
    assert "Traceback" not in done.stderr

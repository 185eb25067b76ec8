"""`python -m mirage_jax demo`: runs end to end, reports what it checked, and its verdict
depends on the checks (a verifier that accepts everything makes it fail)."""

import os
import re
import subprocess
import sys

import pytest

import mirage_jax as mj
from mirage_jax.cli import demo
from mirage_jax.cli import main as cli


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo as a user runs it: the paper's shapes throughout (about 2 s).

    It runs outside the checkout so that it imports the installed package, compiled
    extension included, not the source folder (the same reason the suite runs with -P), and
    on a cache of its own: a verdict another test stored for the same graph would be followed
    without a search or a timing, and the report checked here would not be the first run's.
    """
    home = tmp_path_factory.mktemp("demo")
    return subprocess.run(
        [sys.executable, "-m", "mirage_jax", "demo"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=home,
        env={**os.environ, "MIRAGE_JAX_CACHE": str(home / "cache")},
    )


def test_demo_passes(demo_run):
    assert demo_run.returncode == 0, demo_run.stdout + demo_run.stderr
    assert "PASS" in demo_run.stdout
    assert "FAILED" not in demo_run.stdout


def test_demo_prints_both_graphs_at_the_papers_shapes(demo_run):
    out = demo_run.stdout
    assert "X[8, 4096], G[4096], W[4096, 6144]" in out
    reference = out.split("== reference μGraph")[1].split("== fused μGraph")[0]
    fused = out.split("== fused μGraph")[1].split("== verification")[0]
    assert "customized" not in reference and "rms_norm" in reference
    # the block level is printed too: its grid, for-loop and the accumulators
    assert "customized" in fused
    assert "96" in fused and "32" in fused
    assert "accum_sum" in fused and "accum_mean_last" in fused


def test_demo_reports_the_verification(demo_run):
    out = demo_run.stdout
    assert re.search(r"equivalent:\s+yes", out)
    assert re.search(r"shrunk instance:\s+yes", out)
    trials = int(re.search(r"trials:\s+(\d+)", out).group(1))
    assert trials >= 1
    log2_bound = float(re.search(r"false-accept bound:\s+2\^(-?[\d.]+)", out).group(1))
    assert log2_bound <= -40


def test_demo_compares_the_interpreters(demo_run):
    out = demo_run.stdout
    max_rel = float(re.search(r"max rel error:\s+(\S+)", out).group(1))
    assert 0 <= max_rel <= demo.RELATIVE_TOLERANCE
    assert "X[8, 4096] W[4096, 6144]" in out


def test_demo_rejects_every_mutant(demo_run):
    lines = demo_run.stdout.split("each must be rejected")[1].split("== verdict")[0]
    assert lines.count("rejected") == 3
    assert "ACCEPTED" not in lines


def test_demo_fails_with_a_verifier_that_accepts_everything(monkeypatch, capsys):
    def accept_all(a, b, **kwargs):
        return mj.VerifyResult(
            equivalent=True, reason="", trials=1, false_accept_bound=2.0**-64, shrunk=True
        )

    monkeypatch.setattr(mj, "verify_equivalent", accept_all)
    assert cli.main(["demo", "--small"]) == 1
    out = capsys.readouterr().out
    assert "ACCEPTED (wrong!)" in out and "FAIL" in out


def test_demo_fails_when_the_fused_graph_is_wrong(monkeypatch, capsys):
    """A fused graph that computes something else fails both the verifier and the interpreter
    comparison."""
    from mirage_jax.ir import paper_graphs

    build = paper_graphs.rmsnorm_linear

    def wrong_pair(**kwargs):
        ref, _ = build(**kwargs)
        _, fused = build(**{**kwargs, "eps": 0.5})
        return ref, fused

    monkeypatch.setattr(paper_graphs, "rmsnorm_linear", wrong_pair)
    assert cli.main(["demo", "--small"]) == 1
    out = capsys.readouterr().out
    assert "[FAILED] verifier accepts the fused graph" in out
    assert "[FAILED] interpreter outputs agree" in out


def test_demo_superoptimizes_and_reports_the_check_and_the_speedup(demo_run):
    out = demo_run.stdout.split("superoptimize the reference")[1].split("broken variants")[0]
    assert "search: searched:" in out or "search cache" in out
    assert "speedup over XLA:" in out
    assert "timings (median of" in out and "xla (the original graph)" in out
    assert "[ok] superoptimized function matches XLA" in demo_run.stdout

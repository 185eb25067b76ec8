"""Kernels that win their region by less than a clear 1.10x: kept out of the program on
their own, tried in the whole program, and kept there only when the program with them is a
clear win over jax.jit (and clearly faster than the program without them). Timings are
replaced by fixed ratios with a little paired noise, so the decisions are the ones under
test, and the verdicts (stored, then loaded by a fresh process memo) decide the same way."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import inputs, normwise, rmsnorm_linear

import mirage_jax as mj
from mirage_jax.cache import store
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.rewrite import decorator, whole_program
from mirage_jax.rewrite import region as _optimize_region
from mirage_jax.runtime import profile as _profile
from mirage_jax.superopt import verdict_cache

ROUNDS = 40


def timer(ratios):
    """A median_times replacement: XLA's (and jax.jit's) time is 1 ms; a function named in
    `ratios` by a prefix runs that many times faster, any other candidate as fast as XLA.
    Samples carry ±0.1% of noise, paired by round, so intervals are tight but real."""

    def fake(functions, args, **_):
        samples = {}
        for name in functions:
            ratio = next((r for p, r in ratios.items() if name.startswith(p)), 1.0)
            base = 1e-3 if name in ("xla", whole_program.XLA) else 1e-3 / ratio
            samples[name] = [base * (1 + 1e-3 * ((i * 7) % 5 - 2)) for i in range(ROUNDS)]
        return _profile.Times(samples), ROUNDS

    return fake


# Any region candidate (named by its hash) runs 1.05x faster than XLA: a marginal win.
REGION = {"": 1.05}


@pytest.fixture
def verdicts_on(monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_VERDICTS", "1")  # the suite turns stored verdicts off
    _optimize_region.forget()
    yield tmp_path
    _optimize_region.forget()


def _optimized(cache_dir):
    return mj.optimize(
        rmsnorm_linear,
        cache_dir=cache_dir,
        config=mj.SearchConfig(max_kernel_ops=1, max_block_ops=6, time_budget_s=5, threads=1),
    )


def test_a_marginal_kernel_runs_when_the_whole_program_clearly_wins(monkeypatch, verdicts_on):
    # the whole program with the marginal kernel runs 1.3x faster than jax.jit
    monkeypatch.setattr(_profile, "median_times", timer({decorator.WITH_MARGINAL: 1.3, **REGION}))
    f = _optimized(verdicts_on)
    x, g, w = inputs()
    got = f(x, g, w)
    assert normwise(got, rmsnorm_linear(x, g, w)) < 1e-5
    (report,) = f.regions(x, g, w)
    assert report.chosen == "kernel", report.reason
    assert "not a clear 1.10x" in report.reason and "clearly faster with it" in report.reason
    assert f.uses_kernels(x, g, w)
    assert "mj_cpu_" in jax.jit(f).lower(x, g, w).as_text()
    # explain shows the kernel that runs and how it was checked, as for a chosen one
    text = f.explain(x, g, w)
    assert decorator.WITH_MARGINAL in text
    assert "runner-up graph:\n  kernel graph" in text and "customized(" in text
    assert "verification: equivalent to the original by finite-field fingerprints" in text
    assert "adversarial float checks: passed" in text

    # A fresh process memo on the same cache: the region's verdict brings its marginal
    # kernel back, and the program's verdict keeps it, without timing anything.
    _optimize_region.forget()

    def no_timing(*_, **__):
        raise AssertionError("a stored verdict should have been followed")

    monkeypatch.setattr(_profile, "median_times", no_timing)
    again = _optimized(verdicts_on)
    assert normwise(again(x, g, w), rmsnorm_linear(x, g, w)) < 1e-5
    assert again.regions(x, g, w)[0].chosen == "kernel"
    assert again.uses_kernels(x, g, w)
    text = again.explain(x, g, w)
    assert "runner-up graph:\n  kernel graph" in text
    assert "float checks: not run again; they passed when the verdict was measured" in text


def test_a_stored_marginal_candidate_that_is_not_equivalent_is_never_run(monkeypatch, verdicts_on):
    monkeypatch.setattr(_profile, "median_times", timer({decorator.WITH_MARGINAL: 1.3, **REGION}))
    f = _optimized(verdicts_on)
    x, g, w = inputs()
    f(x, g, w)
    # The region's verdict now names X @ W, without the norm, as its runner-up.
    (path,) = [
        p
        for p in (verdicts_on / verdict_cache.DIRECTORY).glob("*/verdict.json")
        if "runner_up" in json.loads(p.read_text())
    ]
    doc = json.loads(path.read_text())
    graph = KernelGraph.from_json(doc["runner_up"]["graph_json"])
    wrong = KernelGraph()
    xi, _, wi = (wrong.new_input(t.shape, t.dtype) for t in graph.inputs)
    wrong.mark_output(wrong.matmul(xi, wi))
    doc["runner_up"].update(chosen=wrong.hash(), graph_json=wrong.to_json())
    path.write_text(json.dumps(doc))
    meta = path.parent / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "sha256": store.sha256_of(path)}))
    _optimize_region.forget()
    with pytest.warns(RuntimeWarning, match="the verifier rejects its runner-up"):
        again = _optimized(verdicts_on)
        got = again(x, g, w)
    assert normwise(got, rmsnorm_linear(x, g, w)) < 1e-5  # measured again, right


def test_a_marginal_kernel_is_dropped_when_the_whole_program_does_not_clearly_win(
    monkeypatch, verdicts_on
):
    # alone 1.05x, within the program 1.01x: under the whole program's 1.03x
    monkeypatch.setattr(_profile, "median_times", timer({decorator.WITH_MARGINAL: 1.01, **REGION}))
    f = _optimized(verdicts_on)
    x, g, w = inputs()
    assert normwise(f(x, g, w), rmsnorm_linear(x, g, w)) < 1e-5
    (report,) = f.regions(x, g, w)
    assert report.chosen == "xla"
    assert "not clearly faster with it" in report.reason, report.reason
    assert not f.uses_kernels(x, g, w)
    assert "mj_cpu_" not in jax.jit(f).lower(x, g, w).as_text()


def test_a_candidate_slower_than_xla_is_not_marginal(monkeypatch, verdicts_on):
    monkeypatch.setattr(_profile, "median_times", timer({decorator.WITH_MARGINAL: 2.0, "": 0.9}))
    f = _optimized(verdicts_on)
    x, g, w = inputs()
    f(x, g, w)
    (report,) = f.regions(x, g, w)
    assert report.chosen == "xla" and "whole program" not in report.reason, report.reason
    assert not f.uses_kernels(x, g, w)


def _choose(ratios, monkeypatch, cache_dir):
    monkeypatch.setattr(_profile, "median_times", timer(ratios))
    avals = [jax.ShapeDtypeStruct((4,), jnp.float32)]
    closed = jax.make_jaxpr(jnp.sin)(*avals)
    variants = {"clear": lambda x: jnp.sin(x) + 0.0, "richer": lambda x: jnp.sin(x) * 1.0}
    return whole_program.choose(variants, jnp.sin, avals, closed, cache_dir)


@pytest.mark.parametrize(
    "ratios, chosen",
    [
        ({"clear": 1.2, "richer": 1.5}, "richer"),  # both win, the richer clearly more
        ({"clear": 1.2, "richer": 1.2}, "clear"),  # the richer is not clearly faster
        ({"clear": 1.2, "richer": 1.1}, "clear"),  # the richer is slower
        ({"clear": 1.01, "richer": 1.5}, "richer"),  # only the richer is a clear win
        ({"clear": 1.2, "richer": 0.8}, "clear"),
        ({"clear": 1.01, "richer": 1.02}, None),  # neither clears 1.03x: jax.jit
    ],
)
def test_choose_between_programs(ratios, chosen, monkeypatch, tmp_path):
    got, note = _choose(ratios, monkeypatch, tmp_path)
    assert got == chosen, note
    assert note.endswith(f"runs {chosen or 'jax.jit'}") or chosen is None, note
    if chosen == "clear" and ratios["richer"] == ratios["clear"]:
        assert "richer over clear" in note and "so clear is kept" in note, note


@pytest.mark.parametrize(
    "names, kept",
    [((whole_program.REWRITTEN, "richer"), whole_program.REWRITTEN), (("richer",), None)],
)
def test_a_timing_that_fails_keeps_only_the_clear_kernels(names, kept, monkeypatch, tmp_path):
    def broken(*_, **__):
        raise RuntimeError("timer broke")

    monkeypatch.setattr(_profile, "median_times", broken)
    avals = [jax.ShapeDtypeStruct((4,), jnp.float32)]
    closed = jax.make_jaxpr(jnp.sin)(*avals)
    variants = {name: (lambda x: jnp.sin(x) * 1.0) for name in names}
    chosen, note = whole_program.choose(variants, jnp.sin, avals, closed, tmp_path)
    assert chosen == kept and "not timed (RuntimeError: timer broke)" in note, note


def test_choose_stores_its_verdict(monkeypatch, verdicts_on):
    assert _choose({"clear": 1.2, "richer": 1.5}, monkeypatch, verdicts_on)[0] == "richer"
    # loaded, whatever the timer would say now
    chosen, note = _choose({"clear": 1.2, "richer": 0.5}, monkeypatch, verdicts_on)
    assert chosen == "richer" and "verdict loaded from the cache" in note, note


def test_choose_times_real_programs(tmp_path):
    # no replaced timer: the richer program skips most of the work
    a = jnp.asarray(np.random.default_rng(0).standard_normal((256, 256)), jnp.float32)

    def plain(x):
        for _ in range(8):
            x = jnp.tanh(x @ a)
        return x

    def clear(x):
        for _ in range(4):
            x = jnp.tanh(x @ a)
        return x

    avals = [jax.ShapeDtypeStruct((256, 256), jnp.float32)]
    closed = jax.make_jaxpr(plain)(*avals)
    variants = {"clear": clear, "richer": jnp.tanh}
    chosen, note = whole_program.choose(variants, plain, avals, closed, tmp_path)
    assert chosen == "richer", note
    assert "richer over clear" in note, note

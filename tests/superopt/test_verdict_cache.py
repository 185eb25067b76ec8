"""Stored verdicts (mirage_jax/superopt/verdict_cache.py): a second superoptimize call on
the same cache follows the first one's verdict without searching or timing; a damaged
verdict heals (timed again) with one warning; a verdict naming a graph the verifier rejects
is never run."""

import json
import warnings

import jax
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    random_inputs,
    session_kernel_cache,
)

import mirage_jax as mj
from mirage_jax.cache import admin, archive, store
from mirage_jax.cli import cache as cli_cache
from mirage_jax.ir.graph import KernelGraph
from mirage_jax.ir.paper_graphs import rmsnorm_linear
from mirage_jax.runtime import compile as _compile
from mirage_jax.runtime import profile as _profile
from mirage_jax.superopt import search as _search
from mirage_jax.superopt import verdict_cache

CONFIG = mj.SearchConfig(threads=2, time_budget_s=50, max_kernel_ops=1, max_block_ops=5)


def reference():
    ref, _ = rmsnorm_linear(batch=8, hidden=512, out_features=512, col_tile=4, k_tile=4)
    return ref


@pytest.fixture(autouse=True)
def verdicts_on(monkeypatch, request):
    """Verdicts on, in a directory of this test's own (kernels stay in the session cache)."""
    monkeypatch.setenv(verdict_cache.ENV, "1")
    monkeypatch.setattr(verdict_cache, "DIRECTORY", f"verdicts-{request.node.name}")


def superoptimize():
    return mj.superoptimize(reference(), CONFIG, top_k=1, progress=False)


def clear_win_timer(monkeypatch):
    """A timer whose rounds make every candidate a clear 1.5x win; returns its call count."""
    calls = []

    def fake(functions, args, budget_s=None):
        calls.append(sorted(functions))
        return _profile.Times(
            {
                n: [(1.5e-3 if n == "xla" else 1.0e-3) * (1 + 0.01 * i) for i in range(6)]
                for n in functions
            }
        ), 6

    monkeypatch.setattr(_profile, "median_times", fake)
    return calls


def counting(monkeypatch):
    """Counts timing and search calls made from now on (they still run)."""
    counts = {"timing": 0, "search": 0}
    real_times, real_search = _profile.median_times, _search.search

    def times(*args, **kwargs):
        counts["timing"] += 1
        return real_times(*args, **kwargs)

    def search(*args, **kwargs):
        counts["search"] += 1
        return real_search(*args, **kwargs)

    monkeypatch.setattr(_profile, "median_times", times)
    monkeypatch.setattr(_search, "search", search)
    return counts


def entry():
    (found,) = (store.cache_root() / verdict_cache.DIRECTORY).glob("[!.]*")
    return found


def test_a_second_call_follows_the_verdict_without_searching_or_timing(monkeypatch):
    clear_win_timer(monkeypatch)
    first = superoptimize()
    assert first.graph.hash() != reference().hash()  # the kernel won
    doc = json.loads((entry() / "verdict.json").read_text())
    assert doc["chosen"] == first.graph.hash() and doc["low"] > 1 and doc["rounds"] == 6
    assert doc["checks"]["float_check"] and doc["machine"]["cores"]
    counts = counting(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = superoptimize()
    assert counts == {"timing": 0, "search": 0}
    assert second.graph.hash() == first.graph.hash() and second.source == first.source
    report = second.report()
    assert "verdict: loaded from the verdict cache, measured" in report
    assert "verification (run again now): equivalent" in report
    assert "float checks: not run again; they passed when the verdict was measured" in report
    inputs = random_inputs(reference(), seed=2)
    (got,), (want,) = second(*inputs), jax_reference(inputs)
    assert abs(got - want).max() <= 1e-4 * abs(want).max()


def jax_reference(inputs):
    return jax.jit(mj.compile(reference()))(*inputs)


def test_an_xla_verdict_is_followed_too(monkeypatch):
    def fake(functions, args, budget_s=None):
        return _profile.Times({n: [1.0e-3 if n == "xla" else 2.0e-3] * 5 for n in functions}), 5

    monkeypatch.setattr(_profile, "median_times", fake)
    assert superoptimize().graph.hash() == reference().hash()
    counts = counting(monkeypatch)
    again = superoptimize()
    assert counts == {"timing": 0, "search": 0} and again.graph.hash() == reference().hash()
    assert again.source == "" and "chosen: the original graph with XLA (the stored verdict)" in (
        again.report()
    )


def test_a_corrupted_verdict_heals_with_one_warning(monkeypatch):
    calls = clear_win_timer(monkeypatch)
    first = superoptimize()
    (entry() / "verdict.json").write_text('{"scope": "region", "chosen": "')
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        second = superoptimize()
    messages = [str(w.message) for w in record if "verdict" in str(w.message)]
    assert len(messages) == 1 and "unusable" in messages[0] and "timing again" in messages[0]
    assert len(calls) == 2 and second.graph.hash() == first.graph.hash()
    assert verdict_cache.entry_problem(entry()) is None  # stored anew


def test_a_verdict_whose_graph_fails_verification_is_never_run(monkeypatch):
    calls = clear_win_timer(monkeypatch)
    superoptimize()
    # the verdict now names a graph that is not the reference: X @ W, without the norm
    wrong = KernelGraph()
    x, _, w = (wrong.new_input(t.shape, t.dtype) for t in reference().inputs)
    wrong.mark_output(wrong.matmul(x, w))
    path = entry() / "verdict.json"
    doc = json.loads(path.read_text())
    doc.update(chosen=wrong.hash(), graph_json=wrong.to_json())
    path.write_text(json.dumps(doc))
    meta = json.loads((entry() / "meta.json").read_text())
    meta["sha256"] = store.sha256_of(path)
    (entry() / "meta.json").write_text(json.dumps(meta))
    built = []
    real_build = _compile.build
    monkeypatch.setattr(
        _compile, "build", lambda g, *a: built.append(g.hash()) or real_build(g, *a)
    )
    with pytest.warns(RuntimeWarning, match="the verifier rejects its graph"):
        f = superoptimize()
    assert wrong.hash() not in built and f.graph.hash() != wrong.hash()
    assert len(calls) == 2  # timed again instead


def test_verdicts_are_listed_verified_exported_imported_and_cleared_like_other_entries(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(verdict_cache, "DIRECTORY", store.KINDS[verdict_cache.KIND].directory)
    source, target = tmp_path / "source", tmp_path / "target"
    with store.using_cache_root(source):
        verdict_cache.save(
            "a" * 32,
            {
                "scope": "region",
                "label": "rms",
                "chosen": "xla",
                "ratio": 0.8,
                "low": 0.7,
                "high": 0.9,
                "rounds": 12,
            },
        )
    (source / verdict_cache.DIRECTORY / ("b" * 32)).write_text("not a verdict")
    assert cli_cache._list(source) == 0
    listed = capsys.readouterr().out
    assert "region  rms" in listed and "0.80x [0.70, 0.90] 12 rounds" in listed
    assert cli_cache._verify(source) == 1  # the damaged one is bad, and removed
    verified = capsys.readouterr().out
    assert f"ok   verdict {'a' * 32}" in verified and f"BAD  verdict {'b' * 32}" in verified
    done = archive.export_cache(tmp_path / "v.tar.gz", source)
    assert done.done == [("verdict", "a" * 32)]
    imported = archive.import_cache(tmp_path / "v.tar.gz", target, trust_unsigned=True)
    assert imported.done == [("verdict", "a" * 32)] and not imported.refused
    assert [e.kind for e in admin.entries(target)] == ["verdict"]
    assert cli_cache._clear(target, yes=True) == 0
    assert list(admin.entries(target)) == []

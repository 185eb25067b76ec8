"""The search result cache (mirage_jax/superopt/search_cache.py): what the key covers, round trips
through JSON, corrupt entries rebuilt with a warning, and one search per key across threads
and processes."""

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest
from search_test_support import CONFIG, Searches, graphs, skip_if_the_core_changed

import mirage_jax as mj
from mirage_jax.cache import store as cache_store
from mirage_jax.superopt import machine, search_cache


@pytest.fixture
def root(monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_key_covers_graph_config_backend_and_target_but_not_threads_or_budget():
    ref, fused = graphs()
    key = search_cache.search_key(ref, CONFIG, "cpu")
    assert search_cache.search_key(graphs()[0], CONFIG, "cpu") == key  # an equal graph
    assert search_cache.search_key(fused, CONFIG, "cpu") != key
    assert (
        search_cache.search_key(
            ref, mj.SearchConfig(threads=1, max_kernel_ops=1, max_block_ops=5), "cpu"
        )
        == key
    )
    # the budget is recorded in the entry instead (next test)
    assert (
        search_cache.search_key(ref, dataclasses.replace(CONFIG, time_budget_s=5.0), "cpu") == key
    )
    for change in (
        dict(max_block_ops=4),
        dict(preset="attention"),
        dict(seed=1),
        dict(target="h100"),
    ):
        other = dataclasses.replace(CONFIG, **change)
        assert search_cache.search_key(ref, other, "cpu") != key, change
    assert search_cache.search_key(ref, CONFIG, "cuda") != key


def test_key_covers_the_search_code(monkeypatch):
    # A change to the Python side of the search (a new kind of candidate) is not answered
    # from an older entry, nor is a region's verdict that followed it.
    ref, _ = graphs()
    key = search_cache.search_key(ref, CONFIG, "cpu")
    fingerprints = cache_store.fingerprints()
    monkeypatch.setattr(machine, "search_code_digest", lambda: "another search")
    assert search_cache.search_key(ref, CONFIG, "cpu") != key
    assert cache_store.fingerprints() != fingerprints


def test_a_stored_result_loads_back_equal_without_searching(root):
    ref, _ = graphs()
    search = Searches()
    first, hit = search_cache.cached_search(ref, CONFIG, "cpu", search)
    assert (hit, search.calls) == (False, 1)
    second, hit = search_cache.cached_search(ref, CONFIG, "cpu", search)
    assert (hit, search.calls) == (True, 1)
    assert [c.hash() for c in second] == [c.hash() for c in first]
    assert second.costs == first.costs
    assert second.stats == first.stats and second.reason == first.reason
    (entry,) = [p for p in (root / "searches").iterdir() if p.name != ".locks"]
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["kind"] == "search" and meta["key"] == entry.name
    assert {"sha256", "mirage_jax", "jaxlib", "core", "search_code"} <= set(meta)


def test_a_search_cut_short_answers_smaller_budgets_and_a_larger_one_searches_again(root):
    ref, _ = graphs()
    short = Searches(reason="time budget spent")
    config = dataclasses.replace(CONFIG, time_budget_s=4.0)
    search_cache.cached_search(ref, config, "cpu", short)
    for budget in (4.0, 2.0):  # what 4 s found answers any budget up to 4 s
        _, hit = search_cache.cached_search(
            ref, dataclasses.replace(CONFIG, time_budget_s=budget), "cpu", short
        )
        assert hit, budget
    assert short.calls == 1
    complete = Searches()  # 8 s: a longer search may find more; this one runs to its end
    _, hit = search_cache.cached_search(
        ref, dataclasses.replace(CONFIG, time_budget_s=8.0), "cpu", complete
    )
    assert not hit and complete.calls == 1
    # a search that ran to its end answers every budget, larger ones included
    _, hit = search_cache.cached_search(
        ref, dataclasses.replace(CONFIG, time_budget_s=60.0), "cpu", complete
    )
    assert hit and complete.calls == 1


def test_a_stopped_search_is_not_cached(root):
    ref, _ = graphs()
    search = Searches(reason="stopped")
    for _ in range(2):
        result, hit = search_cache.cached_search(ref, CONFIG, "cpu", search)
        assert not hit and result.reason == "stopped"
    assert search.calls == 2


def entry_of(root):
    (entry,) = [p for p in (root / "searches").iterdir() if p.name != ".locks"]
    return entry


def test_an_entry_failing_its_checksum_is_searched_again_with_a_warning(root):
    ref, _ = graphs()
    search = Searches()
    search_cache.cached_search(ref, CONFIG, "cpu", search)
    result_file = entry_of(root) / "result.json"
    result_file.write_text(result_file.read_text().replace("1.5e-06", "9.5e-06"))
    with pytest.warns(RuntimeWarning, match="is corrupt .*does not match the recorded checksum"):
        result, hit = search_cache.cached_search(ref, CONFIG, "cpu", search)
    assert (hit, search.calls) == (False, 2)
    assert result.costs[0] == 1.5e-6
    assert search_cache.entry_problem(entry_of(root)) is None  # rebuilt, sound again


def test_an_entry_that_does_not_load_is_searched_again_with_a_warning(root):
    ref, _ = graphs()
    search = Searches()
    search_cache.cached_search(ref, CONFIG, "cpu", search)
    entry = entry_of(root)
    # Consistent with its checksum, but a graph the IR refuses (a matmul of mismatched dims).
    doc = json.loads((entry / "result.json").read_text())
    doc["candidates"][1] = doc["candidates"][1].replace("16", "17", 1)
    (entry / "result.json").write_text(json.dumps(doc))
    meta = json.loads((entry / "meta.json").read_text())
    meta["sha256"] = search_cache.cache.sha256_of(entry / "result.json")
    (entry / "meta.json").write_text(json.dumps(meta))
    with pytest.warns(RuntimeWarning, match="is corrupt .*does not load"):
        _, hit = search_cache.cached_search(ref, CONFIG, "cpu", search)
    assert (hit, search.calls) == (False, 2)


def test_concurrent_threads_search_a_key_once(root):
    ref, _ = graphs()
    search = Searches(delay=0.3)
    hits = []
    threads = [
        threading.Thread(
            target=lambda: hits.append(search_cache.cached_search(ref, CONFIG, "cpu", search)[1])
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert search.calls == 1
    assert sorted(hits) == [False, True, True, True]


# Each process searches with a slow stand-in that logs its start and end, so overlapping
# searches would show as interleaved lines.
PROCESS_SCRIPT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    import search_test_support as t
    from mirage_jax.superopt import search_cache

    def search():
        with open(sys.argv[2], "a") as log:
            log.write("start\\n")
        time.sleep(1.0)
        with open(sys.argv[2], "a") as log:
            log.write("end\\n")
        return t.fake_result()

    result, hit = search_cache.cached_search(t.graphs()[0], t.CONFIG, "cpu", search)
    print("hit" if hit else "searched", len(result), search_cache._core_digest())
""")


def test_a_second_process_waits_for_the_first_and_reads_its_result(root, tmp_path):
    log = tmp_path / "searches.log"
    env = {**os.environ, "MIRAGE_JAX_CACHE": str(root)}
    command = [
        sys.executable,
        "-P",
        "-c",
        PROCESS_SCRIPT,
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        str(log),
    ]
    processes = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = sorted(p.communicate(timeout=120)[0].split() for p in processes)
    assert [p.returncode for p in processes] == [0, 0]
    skip_if_the_core_changed(*(digest for _, _, digest in outputs))
    assert [line[:2] for line in outputs] == [["hit", "2"], ["searched", "2"]]
    assert log.read_text() == "start\nend\n"

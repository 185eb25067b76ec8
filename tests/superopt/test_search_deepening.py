"""Iterative deepening of the search (mirage_jax/superopt/deepening.py): the rungs climbed to
a config's limits, how the budget is shared among them, and that what a narrower config finds
is in a wider config's result."""

import dataclasses

import pytest

import mirage_jax as mj
from mirage_jax.ir import paper_graphs
from mirage_jax.superopt import deepening

WIDE = mj.SearchConfig(preset="lora", threads=2, max_kernel_ops=2, max_block_ops=6)


def limits(config):
    return (config.max_kernel_ops, config.max_block_ops, config.max_block_graphs)


def test_rungs_climb_from_narrow_limits_to_the_config_itself():
    ladder = deepening.rungs(WIDE)
    assert ladder[-1] == WIDE
    assert [limits(r) for r in ladder] == [
        (1, 4, 1), (1, 5, 1), (2, 4, 1), (1, 6, 1), (2, 5, 1), (2, 6, 1),
    ]  # fmt: skip
    # Every narrower config within the ladder's limits is one of its rungs.
    climbed = [(r.max_kernel_ops, r.max_block_ops) for r in ladder]
    assert all((k, b) in climbed for k in (1, 2) for b in (4, 5, 6))
    # Everything but the limits is the config's.
    for rung in ladder:
        assert dataclasses.replace(rung, max_kernel_ops=2, max_block_ops=6) == WIDE


def test_a_config_at_the_first_rung_runs_alone():
    narrow = mj.SearchConfig(max_kernel_ops=1, max_block_ops=3)
    assert deepening.rungs(narrow) == [narrow]


class Rungs:
    """A stand-in search: records each rung's config and reports the seconds it was given
    as spent (or `spend` of them), with the reasons listed for its calls in turn."""

    def __init__(self, reasons=(), spend=1.0):
        self.configs = []
        self.reasons = list(reasons)
        self.spend = spend

    def __call__(self, config):
        self.configs.append(config)
        reason = self.reasons.pop(0) if self.reasons else ""
        stats = mj.SearchStats(1, 0, 0, 0, 0.0, config.time_budget_s * self.spend, 0.0, 0.0)
        return mj.SearchResult([], [], stats, reason)


def test_rungs_share_what_is_left_and_the_last_takes_all_of_it():
    config = dataclasses.replace(WIDE, time_budget_s=60.0)
    run = Rungs(spend=0.1)  # each rung runs to its end in a tenth of its share
    deepening.climb(config, run)
    budgets = [c.time_budget_s for c in run.configs]
    assert len(budgets) == 6
    assert budgets[0] == pytest.approx(10.0)  # 60 s over 6 rungs
    assert budgets[1] == pytest.approx((60.0 - 1.0) / 5)
    spent = sum(b * 0.1 for b in budgets[:-1])
    assert budgets[-1] == pytest.approx(60.0 - spent)


def test_a_budget_spent_on_the_rungs_ends_the_climb():
    config = dataclasses.replace(WIDE, time_budget_s=6.0)
    run = Rungs(spend=1.0)  # every rung spends its whole share
    deepening.climb(config, run)
    # Shares of what is left: 1, 1, 1, 1, 1, then the last rung gets the last second.
    assert [c.time_budget_s for c in run.configs] == pytest.approx([1.0] * 6)


@pytest.mark.parametrize(
    "reason, rungs_run",
    [
        ("stopped", 2),  # the caller said stop: no wider rung
        ("cannot search this target: no", 2),  # every wider rung would fail the same way
        ("time budget spent", 6),  # a rung out of its share: the wider ones still run
    ],
)
def test_the_climb_ends_after_a_rung_that_stops(reason, rungs_run):
    run = Rungs(reasons=["", reason])
    deepening.climb(WIDE, run)
    assert len(run.configs) == rungs_run


def hashes(result):
    return {graph.hash() for graph in result}


# LoRA at a small size. The one-kernel concat form has 1 kernel op and 4 block ops: a search
# at those limits finds it in about a second; the depth-first search at 2 kernel ops and 6
# block ops spends 30 s (the most measured) under other branches without reaching it.
BUDGET_S = 10.0


@pytest.fixture(scope="module")
def lora():
    return paper_graphs.lora(tokens=8, d_in=16, d_out=32, rank=4, col_tile=8)


@pytest.fixture(scope="module")
def narrow(lora):
    ref, _ = lora
    config = dataclasses.replace(WIDE, max_kernel_ops=1, max_block_ops=4, deepen=False)
    return mj.search(ref, config, progress=False)


@pytest.fixture(scope="module")
def deepened(lora):
    """(the result, its progress reports) of the wide config, deepened."""
    ref, _ = lora
    reports = []
    config = dataclasses.replace(WIDE, time_budget_s=BUDGET_S)
    return mj.search(ref, config, progress=reports.append), reports


def searched_whole(result):
    """The hashes of the candidates the search of the whole gave: at one kernel op, one op
    besides the inputs and outputs, or the original graph. The rest are splices of the parts
    (search.py), searched with what time the whole took and left, so they vary with the
    machine's speed and are no part of what deepening promises."""
    ops = [[op for op in g.ops if op.kind not in ("input", "output")] for g in result]
    return {g.hash() for g, body in zip(result, ops, strict=True) if len(body) <= 1}


def test_what_a_narrow_config_finds_a_wider_one_finds_too(lora, narrow, deepened):
    ref, fused = lora
    assert narrow.reason == "" and fused.hash() in hashes(narrow)
    wide, _ = deepened
    assert fused.hash() in searched_whole(narrow)
    assert searched_whole(narrow) | {ref.hash()} <= hashes(wide)
    assert wide.costs == sorted(wide.costs) and len(hashes(wide)) == len(wide)


def test_without_deepening_the_wide_config_misses_it_in_the_same_budget(lora):
    ref, fused = lora
    config = dataclasses.replace(WIDE, time_budget_s=BUDGET_S, deepen=False)
    result = mj.search(ref, config, progress=False)
    assert result.reason == "time budget spent"
    assert fused.hash() not in hashes(result)


def test_a_deepened_search_reports_progress_across_its_rungs(narrow, deepened):
    result, reports = deepened
    seconds = [p.seconds for p in reports]
    states = [p.states_explored for p in reports]
    assert seconds == sorted(seconds) and states == sorted(states)
    assert states[-1] <= result.stats.states_explored
    # The rungs after the first went on from its count, and the stats sum every rung.
    assert states[-1] > narrow.stats.states_explored
    assert result.stats.states_explored > narrow.stats.states_explored


def test_max_verified_keeps_the_original_besides_the_best_candidates(lora):
    """As one search returns max_verified candidates and the original, so does a deepened
    one: cutting the merged rungs to max_verified must not drop the original graph."""
    ref, _ = lora
    config = dataclasses.replace(WIDE, max_block_ops=5, max_verified=1, time_budget_s=BUDGET_S)
    result = mj.search(ref, config, progress=False)
    assert ref.hash() in hashes(result)
    assert len(result) == 2

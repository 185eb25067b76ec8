"""The cost model's ranking figures (benchmarks/ranking.py) against Spearman's closed form
(superoptimize's costs, which they read, are checked in tests/superopt)."""

import math

import numpy as np
import pytest
from benchmark_support import import_benchmarks


@pytest.fixture(scope="module")
def ranking():
    (module,) = import_benchmarks("ranking")
    return module


def closed_form(a, b):
    """1 - 6 Σd² / (n (n² - 1)), Spearman's rho for values without ties."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    n = len(a)
    return 1 - 6 * float(((ra - rb) ** 2).sum()) / (n * (n * n - 1))


def test_spearman_matches_the_closed_form_and_handles_ties_and_too_few(ranking):
    rng = np.random.default_rng(3)
    for _ in range(20):
        a, b = list(rng.standard_normal(7)), list(rng.standard_normal(7))
        assert ranking.spearman(a, b) == pytest.approx(closed_form(a, b))
    assert ranking.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert ranking.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert ranking.spearman([1, 1, 2], [5, 6, 7]) == pytest.approx(np.sqrt(3) / 2)
    assert math.isnan(ranking.spearman([1, 2], [2, 1]))
    assert math.isnan(ranking.spearman([1, 1, 1], [1, 2, 3]))


def test_the_fastest_candidate_s_place_in_the_model_s_order(ranking):
    costs = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}
    timings = {"xla": 0.1, "a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0}
    r = ranking.ranking(costs, timings)
    assert r.candidates == 5 and r.spearman == pytest.approx(-1.0)
    assert r.fastest_rank == 5 and r.in_top(4) is False and r.in_top(5) is True
    assert ranking.ranking({}, {"xla": 1.0}).fastest_rank is None


def test_regret_is_the_model_s_first_choice_over_the_fastest(ranking):
    r = ranking.ranking({"a": 1.0, "b": 2.0, "c": 3.0}, {"xla": 0.1, "a": 3.0, "b": 2.0, "c": 1.5})
    assert r.regret == pytest.approx(2.0)
    assert ranking.ranking({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 4.0}).regret == 1.0


def test_the_summary_over_calls(ranking):
    calls = [
        ranking.ranking({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 1.0, "b": 2.0, "c": 3.0}),
        ranking.ranking({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 4.0, "b": 2.0, "c": 1.0}),
        ranking.ranking({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}),  # too few for Spearman
        ranking.ranking({}, {"xla": 1.0}),  # nothing timed: left out
    ]
    s = ranking.summarize(calls)
    assert (s.ranked, s.with_spearman, s.fastest_in_top4) == (3, 2, 3)
    assert s.mean_spearman == pytest.approx(0.0)
    assert s.regret_geomean == pytest.approx(4.0 ** (1 / 3))
    assert "mean Spearman 0.00 over 2 calls" in s.line()
    assert "no call timed" in ranking.summarize([]).line()

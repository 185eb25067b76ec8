"""benchmarks/search_reach.py's time to the best: the first progress report whose best so far
is within BEST_TOLERANCE of the last report's, and none without an accepted candidate."""

from benchmark_support import import_benchmarks

import mirage_jax as mj

(search_reach,) = import_benchmarks("search_reach")


def report(seconds, best):
    return mj.SearchProgress(1, 4, 100, 1, seconds, best, 2e-3)


def test_the_best_counts_as_found_when_first_within_tolerance_of_the_last():
    reports = [
        report(0.1, None),
        report(0.5, 1e-3),
        report(1.5, 0.8e-3 * (1 + search_reach.BEST_TOLERANCE / 2)),  # as good as the last
        report(3.0, 0.8e-3),
        report(9.0, 0.8e-3),
    ]
    assert search_reach.best_found_at(reports) == 1.5


def test_no_accepted_candidate_gives_no_time():
    assert search_reach.best_found_at([report(0.1, None), report(2.0, None)]) is None
    assert search_reach.best_found_at([]) is None


def test_the_first_candidate_and_the_papers_graph_are_timed_against_each_other():
    from mirage_jax.ir import paper_graphs as pg

    reference, paper = pg.rmsnorm_linear(batch=2, hidden=64, out_features=32, col_tile=4, k_tile=4)
    times = search_reach.time_against_paper(reference, paper, budget_s=0.2)
    assert times["first_ms"] > 0 and times["paper_ms"] > 0 and "fused_ms" not in times
    times = search_reach.time_against_paper(reference, paper, budget_s=0.2, fused=paper)
    assert set(times) == {"first_ms", "paper_ms", "fused_ms"} and times["fused_ms"] > 0
    # the same graph as the first is not timed twice
    times = search_reach.time_against_paper(reference, paper, budget_s=0.2, fused=reference)
    assert "fused_ms" not in times
    # the program itself, as XLA runs it
    times = search_reach.time_against_paper(paper, paper, budget_s=0.2, reference=reference)
    assert set(times) == {"first_ms", "paper_ms", "xla_ms"} and times["xla_ms"] > 0


def test_every_row_builds_its_program_and_best_known_form():
    # the model programs' rows at their small shapes: same inputs, one output each
    from mirage_jax.ir import model_graphs

    names = [name for name, _ in search_reach.CASES]
    assert len(set(names)) == len(names)
    for program in model_graphs.PROGRAMS.values():
        assert program.name in names
        reference, best = program.build(**program.small)
        assert [t.shape for t in reference.inputs] == [t.shape for t in best.inputs]
        assert search_reach.kernels(best) >= 1

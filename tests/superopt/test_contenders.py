"""Which candidates superoptimize times (mirage_jax/superopt/contenders.py): the model's best
top_k besides the original, and past them the candidates whose cost ties the best's, as long
as all their kernels build side by side."""

import types

from mirage_jax.superopt import contenders


def graph(name: str, kernels: int = 1):
    ops = [types.SimpleNamespace(kind="customized")] * kernels + [
        types.SimpleNamespace(kind="input")
    ]
    return types.SimpleNamespace(hash=lambda: name, ops=ops)


def names(chosen):
    return [g.hash() for g, _ in chosen]


def test_the_original_never_takes_a_slot():
    ranked = [(graph("orig", 0), 0.5), (graph("a"), 1.0), (graph("b"), 2.0)]
    chosen, tied = contenders.choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["a"] and tied == 0


def test_ties_join_while_their_kernels_build_at_once():
    tie = 1.0 + contenders.COST_TIE / 2
    ranked = [(graph("a"), 1.0), (graph("b"), tie), (graph("c"), tie), (graph("d"), 1.2)]
    chosen, tied = contenders.choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["a", "b"] and tied == 1
    chosen, tied = contenders.choose(ranked, "orig", top_k=1, build_slots=4)
    assert names(chosen) == ["a", "b", "c"] and tied == 2  # d is no tie
    chosen, tied = contenders.choose(ranked, "orig", top_k=2, build_slots=2)
    assert names(chosen) == ["a", "b"] and tied == 0


def test_a_tie_whose_kernels_would_wait_for_a_build_slot_is_skipped():
    tie = 1.0 + contenders.COST_TIE / 2
    ranked = [(graph("a"), 1.0), (graph("six", 6), tie), (graph("b"), tie)]
    chosen, tied = contenders.choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["a", "b"] and tied == 1
    ranked = [(graph("six", 6), 1.0), (graph("a"), tie)]
    chosen, tied = contenders.choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["six"] and tied == 0


def test_no_costs_no_ties():
    ranked = [(graph("a"), None), (graph("b"), None)]
    chosen, tied = contenders.choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["a"] and tied == 0

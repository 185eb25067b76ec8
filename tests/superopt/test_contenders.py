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


def choose(ranked, original, top_k, build_slots):
    """contenders.choose with fake graphs that all load the same runs (the tie order aside)."""
    return contenders.choose(ranked, original, top_k, build_slots, runs=lambda g: 0)


def names(chosen):
    return [g.hash() for g, _ in chosen]


def test_the_original_never_takes_a_slot():
    ranked = [(graph("orig", 0), 0.5), (graph("a"), 1.0), (graph("b"), 2.0)]
    chosen, tied = choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["a"] and tied == 0


def test_ties_join_while_their_kernels_build_at_once():
    tie = 1.0 + contenders.COST_TIE / 2
    ranked = [(graph("a"), 1.0), (graph("b"), tie), (graph("c"), tie), (graph("d"), 1.2)]
    chosen, tied = choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["a", "b"] and tied == 1
    chosen, tied = choose(ranked, "orig", top_k=1, build_slots=4)
    assert names(chosen) == ["a", "b", "c"] and tied == 2  # d is no tie
    chosen, tied = choose(ranked, "orig", top_k=2, build_slots=2)
    assert names(chosen) == ["a", "b"] and tied == 0


def test_a_tie_whose_kernels_would_wait_for_a_build_slot_is_skipped():
    tie = 1.0 + contenders.COST_TIE / 2
    ranked = [(graph("a"), 1.0), (graph("six", 6), tie), (graph("b"), tie)]
    chosen, tied = choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["a", "b"] and tied == 1
    ranked = [(graph("six", 6), 1.0), (graph("a"), tie)]
    chosen, tied = choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["six"] and tied == 0


def test_no_costs_no_ties():
    ranked = [(graph("a"), None), (graph("b"), None)]
    chosen, tied = choose(ranked, "orig", top_k=1, build_slots=2)
    assert names(chosen) == ["a"] and tied == 0


def test_of_tied_candidates_the_fewest_runs_come_first():
    # GPT-2's tied logits: the model tied tiles walked in thousands of short runs with tiles
    # of whole rows, which ran 1.3-3x faster (contenders.py)
    tie = 1.0 + contenders.COST_TIE / 2
    ranked = [(graph("strided"), 1.0), (graph("rows"), tie), (graph("half"), tie)]
    ranked.append((graph("d"), 1.2))
    runs = {"strided": 131_072, "rows": 128, "half": 16_384, "d": 1}.__getitem__
    chosen, tied = contenders.choose(ranked, "orig", 1, 2, runs=lambda g: runs(g.hash()))
    assert names(chosen) == ["rows", "half"] and tied == 1
    # past the tie the model's order stands, however few runs a candidate loads
    order = contenders.tie_order(ranked, runs=lambda g: runs(g.hash()))
    assert names(order) == ["rows", "half", "strided", "d"]


def test_runs_loaded_counts_each_tile_load_of_a_real_graph():
    import mirage_jax as mj

    def gemv(rows_per_block: int, forloop: int):
        kg = mj.KernelGraph()
        w, x = kg.new_input((256, 64)), kg.new_input((64, 1))
        bg = mj.BlockGraph(grid=(256 // rows_per_block, 1, 1), forloop_range=forloop)
        wb = bg.new_input(w, imap=(0, -1, -1), fmap=1 if forloop > 1 else -1)
        xb = bg.new_input(x, imap=(-1, -1, -1), fmap=0 if forloop > 1 else -1)
        product = bg.matmul(wb, xb)
        bg.new_output(bg.accum_sum(product) if forloop > 1 else product, omap=(0, -1, -1))
        (y,) = kg.customized([w, x], bg)
        kg.mark_output(y)
        return kg

    # whole rows: one run per block for w and one for x, 4 blocks
    assert contenders.runs_loaded(gemv(64, 1)) == 8
    # rows cut in 4: each of 64 rows per load, 4 loads, 4 blocks; x one run per load
    assert contenders.runs_loaded(gemv(64, 4)) == 64 * 4 * 4 + 4 * 4

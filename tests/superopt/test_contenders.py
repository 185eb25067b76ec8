"""Which candidates superoptimize times (mirage_jax/superopt/contenders.py): the model's best
top_k besides the original, and past them the candidates whose cost ties the best's, as long
as all their kernels build side by side."""

import types

from search_test_support import norm_then_library_matmul

import mirage_jax as mj
from mirage_jax.ir.paper_graphs import rmsnorm_linear
from mirage_jax.superopt import contenders


def graph(name: str, kernels: int = 1):
    ops = [types.SimpleNamespace(kind="customized")] * kernels + [
        types.SimpleNamespace(kind="input")
    ]
    return types.SimpleNamespace(hash=lambda: name, ops=ops)


def choose(ranked, original, top_k, build_slots):
    """contenders.choose with fake graphs that all read alike (the tie order aside)."""
    return contenders.choose(ranked, original, top_k, build_slots, cut_rows=lambda g: 0)


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


def test_of_tied_candidates_the_least_read_along_rows_come_first():
    # GPT-2's tied logits: the model tied tiles walked along their rows with tiles of whole
    # rows, which ran 1.3-3x faster (contenders.py)
    tie = 1.0 + contenders.COST_TIE / 2
    ranked = [(graph("strided"), 1.0), (graph("rows"), tie), (graph("half"), tie)]
    ranked.append((graph("d"), 1.2))
    cut = {"strided": 25e6, "rows": 0, "half": 25e6, "d": 0}
    chosen, tied = contenders.choose(ranked, "orig", 1, 2, cut_rows=lambda g: cut[g.hash()])
    assert names(chosen) == ["rows", "strided"] and tied == 1
    # past the tie the model's order stands, whatever a candidate reads
    order = contenders.tie_order(ranked, cut_rows=lambda g: cut[g.hash()])
    assert names(order) == ["rows", "strided", "half", "d"]


def test_a_tie_is_the_run_of_costs_within_cost_tie_of_the_first():
    tie = 1.0 + contenders.COST_TIE / 2
    assert contenders.tied_with_best([]) == 0
    assert contenders.tied_with_best([(graph("a"), None), (graph("b"), None)]) == 0
    ranked = [(graph("a"), 1.0), (graph("b"), tie), (graph("c"), 1.2), (graph("d"), tie)]
    assert contenders.tied_with_best(ranked) == 2  # d ties in cost, but after c


def gemv(
    rows_per_block: int, forloop: int, transposed: bool, dtype: str = "float32"
) -> mj.KernelGraph:
    """w[256, 64] @ x[64, 1] (transposed: x[1, 256] @ w[256, 64]) in blocks of rows of the
    result, the k of 64 (256) walked in `forloop` steps; w of `dtype`."""
    kg = mj.KernelGraph()
    if transposed:
        x, w = kg.new_input((1, 256)), kg.new_input((256, 64), dtype)
        bg = mj.BlockGraph(grid=(64 // rows_per_block, 1, 1), forloop_range=forloop)
        xb = bg.new_input(x, imap=(-1, -1, -1), fmap=1 if forloop > 1 else -1)
        wb = bg.new_input(w, imap=(1, -1, -1), fmap=0 if forloop > 1 else -1)
        product, omap, inputs = bg.matmul(xb, wb), (1, -1, -1), [x, w]
    else:
        w, x = kg.new_input((256, 64), dtype), kg.new_input((64, 1))
        bg = mj.BlockGraph(grid=(256 // rows_per_block, 1, 1), forloop_range=forloop)
        wb = bg.new_input(w, imap=(0, -1, -1), fmap=1 if forloop > 1 else -1)
        xb = bg.new_input(x, imap=(-1, -1, -1), fmap=0 if forloop > 1 else -1)
        product, omap, inputs = bg.matmul(wb, xb), (0, -1, -1), [w, x]
    bg.new_output(bg.accum_sum(product) if forloop > 1 else product, omap=omap)
    (y,) = kg.customized(inputs, bg)
    kg.mark_output(y)
    return kg


def test_cut_row_bytes_counts_a_main_stream_walked_along_its_rows():
    # whole rows of w per block: nothing is read in pieces of rows
    assert contenders.cut_row_bytes(gemv(64, 1, transposed=False)) == 0
    # w's rows walked in 4 steps: all of w (4 bytes an element), x's column walked down
    assert contenders.cut_row_bytes(gemv(64, 4, transposed=False)) == 256 * 64 * 4
    assert contenders.cut_row_bytes(gemv(64, 4, False, "bfloat16")) == 256 * 64 * 2
    # x[1, 256] @ w[256, 64]: the loop walks w down its rows and x (a small share) along
    assert contenders.cut_row_bytes(gemv(16, 4, transposed=True)) == 0


def test_a_parts_tied_candidates_are_spliced_least_cut_first():
    # the logits region is searched as parts: its product's whole-row candidate, 4th in the
    # model's order of four tied ones, must be among the PART_CANDIDATES spliced
    from mirage_jax.superopt import parts

    cut = [gemv(64, 4, transposed=False) for _ in range(parts.PART_CANDIDATES)]
    whole_rows = gemv(64, 1, transposed=False)
    result = types.SimpleNamespace(candidates=[*cut, whole_rows], costs=[1.0] * 4)
    assert whole_rows in parts._best(result)
    # not tied: the model's order
    result.costs = [1.0, 1.0, 1.0, 1.5]
    assert whole_rows not in parts._best(result)


def alternative(ranked, chosen, build_slots=2, widening=("a", "b", "c")):
    """contenders.generated_alternative with fake graphs: those named in `widening` hand a
    16-bit operand to XLA's dot, the others generate every matmul."""
    return contenders.generated_alternative(
        ranked,
        "orig",
        chosen,
        build_slots,
        widens=lambda g: g.hash() in widening,
        generates=lambda g: g.hash() not in widening,
    )


def test_a_generating_candidate_is_timed_beside_contenders_that_all_widen_in_xla():
    # Llama's bfloat16 logits: the library dots the model put first ran 1.3x its generated
    # products (contenders.py)
    slack = contenders.WIDENED_DOT_SLACK
    ranked = [(graph("a"), 1.0), (graph("b"), 1.1), (graph("g"), slack), (graph("h"), slack)]
    chosen, _ = choose(ranked, "orig", top_k=1, build_slots=2)
    picked = alternative(ranked, chosen)
    assert picked is not None and picked[0].hash() == "g"
    # past the slack, nothing joins
    ranked[2:] = [(graph("g"), slack * 1.01)]
    assert alternative(ranked, chosen) is None
    # a contender that already generates its matmuls: the machine already answers
    ranked = [(graph("g"), 1.0), (graph("h"), 1.1)]
    assert alternative(ranked, [ranked[0]]) is None
    # not without costs, and not the original
    assert alternative([(graph("g"), None)], [(graph("a"), None)]) is None
    assert alternative([(graph("orig"), 1.0)], [(graph("a"), 1.0)]) is None


def test_a_generating_candidate_whose_kernels_cannot_build_at_once_is_passed_over():
    # its kernels need not build beside the contenders', but all at once
    ranked = [(graph("a", 2), 1.0), (graph("three", 3), 1.1), (graph("g", 2), 1.2)]
    picked = alternative(ranked, [ranked[0]], build_slots=2)
    assert picked is not None and picked[0].hash() == "g"
    assert alternative(ranked, [ranked[0]], build_slots=1) is None


def test_what_widens_in_xla_and_what_generates_every_matmul():
    original, fused = rmsnorm_linear(8, 64, 32, col_tile=16, k_tile=16, dtype="bfloat16")
    library_bf16 = norm_then_library_matmul(original)
    assert mj.verify_equivalent(original, library_bf16).equivalent
    assert contenders.widens_in_library(library_bf16)
    assert not contenders.generates_every_matmul(library_bf16)
    assert contenders.generates_every_matmul(fused)
    assert not contenders.widens_in_library(fused)
    # the original's own dot widens too; in float32 nothing widens
    assert contenders.widens_in_library(original)
    f32, _ = rmsnorm_linear(8, 64, 32, col_tile=16, k_tile=16)
    assert not contenders.widens_in_library(norm_then_library_matmul(f32))
    no_matmul = mj.KernelGraph()
    no_matmul.mark_output(no_matmul.exp(no_matmul.new_input((4, 4))))
    assert not contenders.generates_every_matmul(no_matmul)


def test_candidates_of_the_same_code_are_timed_once():
    # "a4" and "a8" cut k into 4- and 8-row steps: one CPU kernel (the backend's code key).
    ranked = [(graph("a4"), 1.0), (graph("b"), 1.01), (graph("a8"), 1.02), (graph("c"), 1.2)]
    kept = contenders.distinct_code(ranked, lambda g: g.hash().rstrip("48"))
    assert names(kept) == ["a4", "b", "c"]
    assert [cost for _, cost in kept] == [1.0, 1.01, 1.2]


def test_the_cpu_code_key_joins_finer_cuts_of_k():
    from mirage_jax.runtime.backends import BACKENDS

    coarse, fine = (rmsnorm_linear(k_tile=k)[1] for k in (8, 2))  # 8- and 2-row steps
    cpu, cuda = BACKENDS["cpu"].code_key, BACKENDS["cuda"].code_key
    assert coarse.hash() != fine.hash()
    assert cpu(coarse._core) == cpu(fine._core)
    assert cuda(coarse._core) != cuda(fine._core)

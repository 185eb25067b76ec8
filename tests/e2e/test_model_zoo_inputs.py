"""The model zoo itself (benchmarks/models/) and its benchmark's bookkeeping: padded batches
are what batched-prompt pipelines make, every case has the same interface, jax.jit is finite
on the padded batches (so a NaN under mj.optimize is the optimizer's), and the comparison
the benchmark and the tests use flags what it must."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from zoo_support import CASES, import_benchmark_module, zoo, zoo_case


def test_prompt_mask_pads_left_and_right_and_keeps_a_token_per_row():
    common = zoo().common
    mask = common.prompt_mask(4, 16, seed=0)
    assert mask[0].all()  # the longest prompt sets the shape
    assert not mask[1, 0] and mask[1, -1]  # left-padded
    assert mask[2, 0] and not mask[2, -1]  # right-padded
    assert mask.sum(axis=1).min() >= 1
    # each row's tokens are contiguous
    for row in mask:
        idx = np.flatnonzero(row)
        assert (np.diff(idx) == 1).all()
    assert common.prompt_mask(1, 16, seed=0)[0, 0] == False  # noqa: E712 (a batch of one)
    positions = common.positions_of(mask)
    assert positions[1][mask[1]].tolist() == list(range(mask[1].sum()))


def test_cache_mask_never_attends_to_unwritten_slots_and_has_an_empty_slot():
    common = zoo().common
    mask = common.cache_mask(4, 32, 16, seed=0)
    assert not mask[:, 17:].any()
    assert mask[0, :17].all()
    assert not mask[3].any()  # an empty serving slot: a fully masked query row
    assert not mask[1, 0] and mask[1, 16]  # left-padded prompt
    assert mask[2, 0] and mask[2, 16] and not mask[2, 1:16].all()  # a hole after the prompt
    with pytest.raises(ValueError, match="not a decode mode"):
        common.decode_batch("prefill")


def test_every_case_has_the_common_interface():
    models = zoo()
    names = models.case_names("small")
    for model in ("llama", "gpt2"):
        assert {
            f"{model}_prefill",
            f"{model}_decode_b1",
            f"{model}_decode_b4",
            f"{model}_decode_b8",
            f"{model}_generate_b4",
        } <= set(names)
    assert "bert_encode" in names
    assert set(models.case_names("tiny")) >= set(CASES) - {"vit_encode"}
    with pytest.raises(ValueError, match="unknown zoo model"):
        models.case("nomodel_prefill")
    with pytest.raises(ValueError, match="unknown mode"):
        models.case("bert_prefill", "tiny")
    with pytest.raises(ValueError, match="unknown dtype"):
        models.case("bert_encode", "tiny", "f16")


def _avals(tree):
    return jax.tree_util.tree_map(lambda x: (jnp.shape(x), jnp.result_type(x)), tree)


@pytest.mark.parametrize("name", CASES)
def test_padded_batch_has_the_normal_shapes_and_jax_jit_is_finite_on_it(name):
    for dtype in ("f32", "bf16"):
        case = zoo_case(name, dtype)
        assert _avals(case.inputs) == _avals(case.padded)
        assert not all(
            np.array_equal(a, b)
            for a, b in zip(
                jax.tree_util.tree_leaves(case.inputs), jax.tree_util.tree_leaves(case.padded)
            )
        )
        weights = [
            x
            for x in jax.tree_util.tree_leaves(case.params)
            if jnp.issubdtype(jnp.result_type(x), jnp.floating)
        ]
        assert weights and {jnp.result_type(x) for x in weights} == {jnp.dtype(zoo().DTYPES[dtype])}
        for leaf in jax.tree_util.tree_leaves(jax.jit(case.fn)(*case.args(padded=True))):
            if jnp.issubdtype(leaf.dtype, jnp.floating):
                assert leaf.dtype == jnp.dtype(zoo().DTYPES[dtype]) or (
                    name.startswith("llama") and leaf.dtype == jnp.float32
                ), (name, dtype, leaf.dtype)
                assert bool(jnp.isfinite(leaf).all()), (name, dtype)


def test_compare_flags_nan_where_the_reference_is_finite():
    check = zoo().check
    want = {"logits": jnp.ones((3, 4)), "index": jnp.array(2)}
    got = {"logits": jnp.ones((3, 4)).at[1, 2].set(jnp.nan), "index": jnp.array(2)}
    r = check.compare(got, want)
    assert r["nonfinite"] == 1 and "batch rows [1]" in r["where"][0]
    assert r["error"] == 0.0
    # NaN in both: not a mismatch
    assert check.compare(want | {"logits": got["logits"]}, got)["nonfinite"] == 0
    # normwise error over the finite elements
    off = {"logits": jnp.full((3, 4), 2.0).at[0, 0].set(2.5), "index": jnp.array(2)}
    assert math.isclose(
        check.compare(off, {"logits": jnp.full((3, 4), 2.0), "index": jnp.array(2)})["error"], 0.25
    )
    # an integer output that differs is counted, as such
    r = check.compare({"logits": want["logits"], "index": jnp.array(3)}, want)
    assert (r["nonfinite"], r["differs"]) == (0, 1) and r["where"] == [
        "output ['index']: 1 elements differ, rows []"
    ]
    tokens = {"sampled": jnp.array([[1, 2], [3, 4]])}
    r = check.compare({"sampled": jnp.array([[1, 2], [3, 5]])}, tokens)
    assert r["differs"] == 1 and r["where"] == ["output ['sampled']: 1 elements differ, rows [1]"]


def test_harness_arguments():
    run = import_benchmark_module("models_run")
    args = run.parse_args(["--quick"])
    assert args.size == "tiny" and args.runs == 5 and args.budget == run.QUICK_BUDGET_S
    args = run.parse_args(["--only", "gpt2_decode_b8", "--dtype", "bf16"])
    assert args.size == "small" and args.budget is None and args.only == ["gpt2_decode_b8"]
    with pytest.raises(SystemExit):
        run.parse_args(["--quick", "--only", "gpt2_decode_b8"])  # not a tiny case
    with pytest.raises(SystemExit):
        run.parse_args(["--runs", "0"])


def test_report_shouts_about_nan():
    report = import_benchmark_module("models_report")
    row = dict(
        name="gpt2_prefill",
        regions=7,
        converted_regions=7,
        kernel_regions=1,
        kept_end_to_end=1,
        matmuls_converting=0,
        matmuls=13,
        xla_ms=1.0,
        mirage_ms=2.0,
        speedup=0.5,
        jit_first_call_s=1.0,
        cold_s=30.0,
        warm_s=3.0,
        warm_over_jit_s=2.0,
        max_rel_err=1e-7,
        nonfinite=0,
        padded_max_rel_err=0.0,
        padded_nonfinite=0,
        kernels_kept_uses_kernels=True,
        kernels_kept_max_rel_err=2e-7,
        kernels_kept_nonfinite=0,
        kernels_kept_padded_max_rel_err=0.0,
        kernels_kept_padded_nonfinite=4096,
        correct=False,
        failures=["padded batch: NON-FINITE where jax.jit is finite: rows [1]"],
        coverage_reasons={"outside every region: dot_general: x": 13},
        fallbacks={"no candidate beat XLA": 6},
    )
    result = dict(
        machine=dict(cpu="cpu", cores=2, jax="0", device="cpu", load_before=0.0, load_after=0.0),
        size="tiny",
        dtype="f32",
        budget_s=2.0,
        runs=5,
        cases=[row],
        geomean_speedup=0.5,
        tolerance=1e-4,
        unavailable={},
        command="c",
    )
    text = report.markdown(result)
    assert "**NaN/Inf ×4096**" in text and "**FAILURES**" in text
    assert "13× outside every region: dot_general: x" in text
    assert "| gpt2_prefill | 7 / 7 / 1 / 1 | 0/13 |" in text
    assert text.count("**NaN/Inf") == 1  # only the kernels-kept padded column
    assert "| 1.0e-07 | 0.0e+00 | 2.0e-07 | **NaN/Inf ×4096** (0.0e+00) |" in text
    row["differs"] = 1  # a sampled token not jax.jit's
    assert "| **differs ×1** (1.0e-07) | 0.0e+00 |" in report.markdown(result)
    row["kernels_kept_uses_kernels"] = False
    assert "(no kernel)" in report.markdown(result)


def test_ceiling_is_the_time_of_the_compulsory_work():
    roofline = import_benchmark_module("roofline")
    machine = roofline.Roofline(bandwidth=1e10, flops=1e11, read_bytes=0, matmul_n=0)
    x, w = jnp.ones((4, 256), jnp.float32), jnp.ones((256, 512), jnp.float32)
    work_bytes = roofline.compulsory_bytes([x, w], jax.eval_shape(jnp.matmul, x, w))
    assert work_bytes == 4 * (4 * 256 + 256 * 512 + 4 * 512)
    flops = roofline.count_flops(jnp.matmul, [x, w])
    assert flops == 2 * 4 * 256 * 512
    # memory-bound: the bytes at 10 GB/s, not the flops at 100 GFLOP/s
    assert machine.time_bound(work_bytes, flops) == work_bytes / 1e10
    assert not roofline.has_loop(jnp.matmul, [x, w])

    def steps(x, w):  # a sampling loop repeats its work: no bound from counts taken once
        return jax.lax.fori_loop(0, 4, lambda i, y: jnp.tanh(y @ w), x @ w)

    square = jnp.ones((512, 512), jnp.float32)
    assert roofline.has_loop(steps, [jnp.ones((4, 512), jnp.float32), square])
    report = import_benchmark_module("models_report")
    assert report._ceiling({"ceiling": 1.304}) == "1.30×"
    assert report._ceiling({"ceiling": None}) == "–"
    assert report._ceiling({}) == "–"  # results written before the column

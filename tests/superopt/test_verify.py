"""The finite-field verifier: it accepts the paper's μGraphs against their references and
rejects each of them once one attribute is wrong. A verifier that accepts everything, or one
that ignores imaps, fmaps, omaps, accumulators, operand order or constants, fails here.

Every mutant is also run through the float interpreter first, to show the mutation really
changes the program (a mutant that happened to be equivalent would make its test vacuous)."""

import json
import time

import numpy as np
import pytest

import mirage_jax as mj
from mirage_jax.ir import paper_graphs

# ------------------------------------------------------------------------ mutation helper


def mutate(kg, *, block=None, op, **changes):
    """A copy of kg with one op changed, rebuilt through its JSON (so the IR re-checks it).

    block: None for a kernel-level op, else the index of the customized op whose block graph
    holds it. op: (kind, n) picks the n-th op of that kind. changes: JSON attributes to set
    (kind, imap, fmap, omap, scalar, reduce_kind, ...), or swap_inputs=True (binary ops),
    permute_inputs=order, or bypass=i to delete the op and let its consumers read its i-th
    input instead."""
    doc = json.loads(kg.to_json())  # format: mirage_jax/_json.py
    ops = doc["ops"]
    if block is not None:
        ops = [o for o in ops if o["kind"] == "customized"][block]["block_graph"]["ops"]
    kind, n = op
    target = [o for o in ops if o["kind"] == kind][n]
    for key, value in changes.items():
        if key == "swap_inputs":
            target["inputs"].reverse()
        elif key == "permute_inputs":
            target["inputs"] = [target["inputs"][i] for i in value]
        elif key == "bypass":
            (dropped,) = target["outputs"]
            kept = target["inputs"][value]
            ops.remove(target)
            for o in ops:
                if "inputs" in o:
                    o["inputs"] = [kept if t == dropped else t for t in o["inputs"]]
        else:
            target[key] = list(value) if isinstance(value, tuple) else value
    return mj.KernelGraph.from_json(json.dumps(doc))


def random_inputs(kg, rng):
    return [rng.normal(size=t.shape) for t in kg.inputs]


def assert_really_different(ref, mutant, rng):
    inputs = random_inputs(ref, rng)
    (y_ref,) = ref.evaluate(inputs)
    (y_mut,) = mutant.evaluate(inputs)
    assert y_ref.shape == y_mut.shape, "mutants keep the output shape: values must decide"
    assert not np.allclose(y_ref, y_mut, rtol=1e-9, atol=1e-9)


def small(name, **overrides):
    program = paper_graphs.PROGRAMS[name]
    return program.build(**{**program.small, **overrides})


# ----------------------------------------------------------------------------- accepted


@pytest.mark.parametrize("name", sorted(paper_graphs.PROGRAMS))
def test_accepts_paper_graph(name):
    ref, fused = small(name)
    result = mj.verify_equivalent(ref, fused)
    assert result, result.reason
    assert result.reason == ""
    assert result.trials >= 1
    assert result.false_accept_bound <= 2.0**-40


def test_accepts_a_graph_against_itself_and_its_json_copy():
    _ref, fused = small("gqa_decode")
    assert mj.verify_equivalent(fused, fused)
    assert mj.verify_equivalent(fused, mj.KernelGraph.from_json(fused.to_json()))


def test_full_size_rmsnorm_linear_through_shrinking():
    """X[8,4096], W[4096,6144]: checked on the shrunk instance (same grid 96 and for-loop 32,
    tiny tiles), in well under a second rather than hours of finite-field matmuls."""
    ref, fused = paper_graphs.rmsnorm_linear()
    start = time.perf_counter()
    result = mj.verify_equivalent(ref, fused)
    elapsed = time.perf_counter() - start
    assert result, result.reason
    assert result.shrunk
    assert result.false_accept_bound <= 2.0**-40
    assert elapsed < 10.0


@pytest.mark.parametrize("name", sorted(paper_graphs.PROGRAMS))
def test_accepts_paper_graph_at_the_papers_shapes(name):
    ref, fused = paper_graphs.PROGRAMS[name].build()
    result = mj.verify_equivalent(ref, fused)
    assert result, result.reason
    assert result.shrunk
    assert result.false_accept_bound <= 2.0**-40


@pytest.mark.parametrize(
    "name,change",
    [
        ("rmsnorm_linear", dict(block=0, op=("add_scalar", 0), scalar=0.0)),
        ("gqa_prefill", dict(block=1, op=("div", 0), bypass=0)),
        ("gqa_decode", dict(block=0, op=("mul_scalar", 0), scalar=0.125)),
        ("qknorm_gqa", dict(block=0, op=("rms_norm", 0), scalar=0.0)),
    ],
)
def test_full_size_mutant_is_rejected_through_shrinking(name, change):
    """Shrinking keeps the verifier's power: the tiny-tile instance still tells these apart."""
    ref, fused = paper_graphs.PROGRAMS[name].build()
    result = mj.verify_equivalent(ref, mutate(fused, **change))
    assert not result
    assert result.shrunk


def test_small_instances_are_not_shrunk_unless_asked():
    ref, fused = small("rmsnorm_linear")
    assert not mj.verify_equivalent(ref, fused).shrunk
    forced = mj.verify_equivalent(ref, fused, shrink="always")
    assert forced and forced.shrunk


def test_trials_and_seed_are_honoured():
    ref, fused = small("gated_mlp")
    one = mj.verify_equivalent(ref, fused, trials=1, seed=7)
    assert one and one.trials == 1
    # a single trial cannot claim the default bound
    assert one.false_accept_bound > mj.verify_equivalent(ref, fused).false_accept_bound


# ----------------------------------------------------------------------------- rejected

# Each entry: (program, small-shape overrides, mutation). The small shapes (and overrides where
# needed) make the dims a mutation exchanges equal, so every shape stays valid and only values
# can tell the graphs apart.
MUTANTS = {
    # Q rows split by the kv-slice axis instead of the query-tile axis (kv_splits == q_tiles)
    "gqa_wrong_imap": ("gqa_prefill", {}, dict(block=0, op=("input", 0), imap=(0, 1, -1))),
    # the X tile stays put (fmap -1, cut by the grid instead) rather than walking the hidden
    # dim; grid == for-loop range keeps the tile shape
    "rmsnorm_linear_wrong_fmap": (
        "rmsnorm_linear",
        dict(out_features=16, col_tile=4),
        dict(block=0, op=("input", 0), imap=(1, -1, -1), fmap=-1),
    ),
    # partials stored with query tiles and kv slices exchanged (kv_splits == q_tiles)
    "gqa_wrong_omap": ("gqa_prefill", {}, dict(block=0, op=("output", 0), omap=(0, 1, 2))),
    # the combine kernel stores with heads and query tiles exchanged (heads == q_tiles)
    "gqa_combine_wrong_omap": ("gqa_prefill", {}, dict(block=1, op=("output", 0), omap=(1, 0, -1))),
    # accum_sum where accum_mean_last is needed (col_tile == k_tile keeps it broadcastable)
    "rmsnorm_linear_accum_sum_for_mean": (
        "rmsnorm_linear",
        {},
        dict(block=0, op=("accum_mean_last", 0), kind="accum_sum"),
    ),
    "rmsnorm_linear_sum_for_mean": (
        "rmsnorm_linear",
        {},
        dict(block=0, op=("accum_mean_last", 0), kind="accum_sum_last"),
    ),
    "rmsnorm_linear_no_normalization": (
        "rmsnorm_linear",
        {},
        dict(block=0, op=("div", 0), bypass=0),
    ),
    "qknorm_sum_for_mean": ("qknorm_gqa", {}, dict(block=0, op=("reduce", 0), reduce_kind="sum")),
    "rmsnorm_linear_swapped_div": (
        "rmsnorm_linear",
        {},
        dict(block=0, op=("div", 0), swap_inputs=True),
    ),
    "ntrans_swapped_sub": ("ntrans", {}, dict(block=0, op=("sub", 0), swap_inputs=True)),
    "lora_swapped_concat": ("lora", {}, dict(block=0, op=("concat", 0), swap_inputs=True)),
    "rmsnorm_linear_dropped_eps": (
        "rmsnorm_linear",
        {},
        dict(block=0, op=("add_scalar", 0), scalar=0.0),
    ),
    "ntrans_dropped_eps": ("ntrans", {}, dict(block=0, op=("rms_norm", 1), scalar=0.0)),
    # W1 and W3 exchanged at the kernel level: silu gates the wrong branch
    "gated_mlp_swapped_weights": (
        "gated_mlp",
        {},
        dict(op=("customized", 0), permute_inputs=(0, 2, 1)),
    ),
    "gated_mlp_wrong_activation": ("gated_mlp", {}, dict(block=0, op=("silu", 0), kind="gelu")),
    # the combine kernel forgets to divide by the summed row sums of E
    "gqa_combine_no_division": ("gqa_prefill", {}, dict(block=1, op=("div", 0), bypass=0)),
    "gqa_decode_combine_no_division": ("gqa_decode", {}, dict(block=1, op=("div", 0), bypass=0)),
    "gqa_wrong_scale": ("gqa_prefill", {}, dict(block=0, op=("mul_scalar", 0), scalar=0.25)),
    "flash_attention_no_division": (
        "flash_attention_online",
        {},
        dict(block=0, op=("div", 0), bypass=0),
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_rejects_mutant(mutant, rng):
    name, overrides, change = MUTANTS[mutant]
    ref, fused = small(name, **overrides)
    mutated = mutate(fused, **change)
    assert_really_different(ref, mutated, rng)
    result = mj.verify_equivalent(ref, mutated)
    assert not result
    assert result.reason
    assert not mj.verify_equivalent(mutated, ref)


def test_rejects_different_input_shapes_with_a_reason():
    ref, _ = small("rmsnorm_linear")
    _, other = small("rmsnorm_linear", hidden=32)
    result = mj.verify_equivalent(ref, other)
    assert not result
    assert "shape" in result.reason


def test_rejects_different_output_shapes_with_a_reason():
    a = mj.KernelGraph()
    a.mark_output(a.reduce(a.new_input((4, 6), "float32"), 1, "sum"))
    b = mj.KernelGraph()
    b.mark_output(b.reduce(b.new_input((4, 6), "float32"), 0, "sum"))
    result = mj.verify_equivalent(a, b)
    assert not result
    assert "shape" in result.reason


def test_rejects_a_single_wrong_constant_deep_in_a_sum():
    """sum(x) against sum(x) + 2^-30: any verifier that compares only a few coarse features
    (shapes, op counts, a low-precision float check) would accept this."""
    a = mj.KernelGraph()
    a.mark_output(a.reduce(a.new_input((4, 6), "float32"), 1, "sum"))
    b = mj.KernelGraph()
    b.mark_output(b.add_scalar(b.reduce(b.new_input((4, 6), "float32"), 1, "sum"), 2.0**-30))
    assert not mj.verify_equivalent(a, b)

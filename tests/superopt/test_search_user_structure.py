"""SearchConfig's grids, imaps, omaps and fmaps (mirage_jax/superopt/user_structure.py,
cc/search/user_structure.h): each bad value is an error naming it; given ones are the only
ones the search's block graphs use, beyond the target's cap on blocks too; one that admits
no block graph leaves only verified kernel-level candidates; and they reach the cache key
and every rung of a deepened search.

The program is relu(A @ B) over a batch of 2 at [8, 32] @ [32, 16]: three output indices, so
a grid of (2, 8, 16), 256 blocks, splits all of them; the derived grids on "cpu" never do
(two axes at most, and at most 32 waves of this host class's 2 cores). Each search here
takes well under a second.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import mirage_jax as mj
from mirage_jax.superopt import deepening, search_cache

LIMITS = dict(threads=2, time_budget_s=20, max_kernel_ops=1, max_block_ops=3, deepen=False)
GRID = (2, 8, 16)


@pytest.fixture(scope="module")
def ref():
    g = mj.KernelGraph()
    a = g.new_input((2, 8, 32))
    b = g.new_input((2, 32, 16))
    g.mark_output(g.relu(g.matmul(a, b)))
    return g


def search(ref, **fields):
    return mj.search(ref, mj.SearchConfig(**{**LIMITS, **fields}), progress=False)


def layouts(result):
    """(grid, forloop range, imaps, fmaps, omaps) of every block graph of every candidate."""
    for candidate in result:
        for op in candidate.ops:
            if op.kind != "customized":
                continue
            bg = op.block_graph
            ins = [o for o in bg.ops if o.kind == "input"]
            outs = [o for o in bg.ops if o.kind == "output"]
            yield (
                bg.grid,
                bg.forloop_range,
                [o.imap for o in ins],
                [o.fmap for o in ins],
                [o.omap for o in outs],
            )


def assert_all_verified(ref, result):
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(t.shape) for t in ref.inputs]
    expected = np.maximum(inputs[0] @ inputs[1], 0)
    assert ref.hash() in {c.hash() for c in result}, "the graph itself is always a candidate"
    for candidate in result:
        verdict = mj.verify_equivalent(ref, candidate, seed=7)
        assert verdict, f"{verdict.reason}\n{candidate}"
        (got,) = candidate.evaluate(inputs, dtype="float64")
        np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-11, err_msg=str(candidate))


# ------------------------------------------------------------------------ bad values


@pytest.mark.parametrize(
    "fields, error, message",
    [
        (dict(grids=4), TypeError, "argument 'grids' must be None or a list of grids"),
        (dict(grids=()), ValueError, "argument 'grids' is empty"),
        (dict(grids=((2, 8, 16, 2),)), ValueError, "'grids[0]' has 4 entries"),
        (dict(grids=((),)), ValueError, "'grids[0]' has 0 entries"),
        (dict(grids=((2, 0),)), ValueError, "'grids[0][1]' must be >= 1, got 0"),
        (dict(grids=((2.0,),)), TypeError, "grids[0][0]"),
        (dict(grids=("28",)), TypeError, "'grids[0]' must be None or a list of grids"),
        (dict(imaps=((0, 0),)), ValueError, "'imaps[0]' (0, 0) splits one dim on two grid axes"),
        (dict(imaps=((-2,),)), ValueError, "'imaps[0][0]' must be >= -1, got -2"),
        (dict(omaps="0"), TypeError, "argument 'omaps' must be None or a list of maps"),
        (dict(omaps=[[1, 2, 0, 3]]), ValueError, "'omaps[0]' has 4 entries"),
        (
            dict(grids=(GRID,), imaps=((0, 1),)),
            ValueError,
            "'imaps[0]' (0, 1) has 2 entries, but the grids have 3 axes",
        ),
        (
            dict(grids=((1, 8),), omaps=((0, 1),)),
            ValueError,
            "'omaps[0]' (0, 1) splits dim 0 on grid axis 0, which has one block in every grid",
        ),
        (dict(fmaps=1), TypeError, "argument 'fmaps' must be None or a list of integers"),
        (dict(fmaps=(2, -3)), ValueError, "'fmaps[1]' must be a dim or -1, got -3"),
    ],
)
def test_bad_values_are_errors_naming_the_field(fields, error, message):
    with pytest.raises(error) as e:
        mj.SearchConfig(**fields)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            dict(imaps=((3,),)),
            "'imaps[0]' names dim 3, but the graph's tensors have at most 3 dims "
            "(input 0 has shape (2, 8, 32), input 1 has shape (2, 32, 16))",
        ),
        (dict(fmaps=(2, 5)), "'fmaps[1]' names dim 5"),
        (dict(grids=((3,),)), "'grids[0]' (3,) has 3 blocks on axis 0, which divide no dim"),
        (
            # 16 blocks along dim 0, of size 2 in every tensor
            dict(grids=(GRID,), imaps=((2, 1, 0),)),
            "'imaps[0]' (2, 1, 0) splits dims no tensor of the graph can take under grids "
            "((2, 8, 16),): input 0 has 2 at dim 0, which 16 blocks do not divide",
        ),
        (
            dict(grids=((4, 4),), omaps=((1, -1), (2, 0))),
            "'omaps[1]' (2, 0) splits dims no tensor of the graph can take under grids "
            "((4, 4),): input 0 has 2 at dim 0, which 4 blocks do not divide",
        ),
    ],
)
def test_values_no_tensor_can_take_are_errors_when_the_search_starts(ref, fields, message):
    config = mj.SearchConfig(**LIMITS, **fields)  # sound on their own
    with pytest.raises(ValueError) as e:
        mj.search(ref, config, progress=False)
    assert message in str(e.value)


# ------------------------------------------------------------------------ the search


def test_given_grids_replace_the_derived_ones_and_the_cap(ref):
    derived = search(ref)
    assert GRID not in {grid for grid, *_ in layouts(derived)}, "the cap keeps it out"
    result = search(ref, grids=(GRID,))
    found = list(layouts(result))
    assert found, "a block graph on the given grid"
    assert {grid for grid, *_ in found} == {GRID}
    assert_all_verified(ref, result)
    # The best fused candidate also compiles and runs right.
    fused = next(c for c in result if any(op.kind == "customized" for op in c.ops))
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(t.shape).astype(np.float32) for t in ref.inputs]
    (got,) = mj.compile(fused)(*map(jnp.asarray, inputs))
    want = np.maximum(inputs[0].astype(np.float64) @ inputs[1], 0)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


def test_shorter_grids_leave_the_last_axes_unsplit(ref):
    # and an axis of one block may come before a split one
    result = search(ref, grids=((2, 4), (8,), (1, 16)))
    assert {grid for grid, *_ in layouts(result)} == {(2, 4, 1), (8, 1, 1), (1, 16, 1)}
    assert_all_verified(ref, result)


def test_given_maps_are_the_only_ones_used(ref):
    imaps = ((0, 1, -1), (0, -1, 2))
    result = search(ref, grids=(GRID,), imaps=imaps, omaps=((0, 1, 2),), fmaps=(-1,))
    found = list(layouts(result))
    assert found
    for grid, forloop_range, ins, fmaps, outs in found:
        assert grid == GRID and forloop_range == 1
        assert set(ins) <= set(imaps) and set(fmaps) == {-1} and outs == [(0, 1, 2)]
    assert_all_verified(ref, result)


def test_maps_without_grids_narrow_the_derived_grids(ref):
    # Split M (A's dim 1, the output's dim 1) on one axis; B has no M, so it is replicated.
    # The for-loop walks K: A's dim 2, B's dim 1.
    result = search(ref, imaps=((1,), (-1,)), omaps=((1,),), fmaps=(2, 1))
    found = list(layouts(result))
    assert found
    for grid, forloop_range, ins, fmaps, outs in found:
        assert grid[1:] == (1, 1)
        assert ins == [(1, -1, -1), (-1, -1, -1)] and outs == [(1, -1, -1)]
        assert forloop_range > 1 and fmaps == [2, 1]
    assert_all_verified(ref, result)


@pytest.mark.parametrize(
    "fields",
    [
        # B needs (0, -1, 2) on this grid
        dict(grids=(GRID,), imaps=((0, 1, -1),)),
        # a loop over K walks dim 2 of A; no loop gives -1
        dict(fmaps=(0,)),
        # 16 blocks can only split N, which the output has at dim 2, not 1
        dict(grids=((2, 16),), omaps=((0, 1),)),
    ],
)
def test_structure_admitting_no_block_graph_leaves_the_graph_only(ref, fields):
    result = search(ref, **fields)
    assert not list(layouts(result))
    assert [c.hash() for c in result] == [ref.hash()]
    assert_all_verified(ref, result)


# ------------------------------------------------------------------------ plumbing


def test_fields_reach_the_core_padded_to_three_axes():
    config = mj.SearchConfig(
        preset="mlp", grids=[[2, 8]], imaps=[(0, -1), (-1, 1)], omaps=((0, 1),), fmaps=[np.int64(2)]
    )
    assert config.grids == ((2, 8),) and config.imaps == ((0, -1), (-1, 1))
    assert config.fmaps == (2,) and type(config.fmaps[0]) is int
    core = config._to_core()
    assert [tuple(g) for g in core.grids] == [(2, 8, 1)]
    assert [tuple(m) for m in core.imaps] == [(0, -1, -1), (-1, 1, -1)]
    assert [tuple(m) for m in mj.SearchConfig(preset="mlp", imaps=[(1,)])._to_core().imaps] == [
        (1, -1, -1)
    ]
    assert [tuple(m) for m in core.omaps] == [(0, 1, -1)]
    assert list(core.fmaps) == [2]
    assert list(mj.SearchConfig(preset="mlp")._to_core().grids) == []


def test_cache_key_and_hash_tell_the_structures_apart(ref):
    base = mj.SearchConfig(**LIMITS)
    variants = [
        base,
        dataclasses.replace(base, grids=(GRID,)),
        dataclasses.replace(base, grids=((2, 8),)),
        dataclasses.replace(base, imaps=((1,), (-1,))),
        dataclasses.replace(base, omaps=((1,),)),
        dataclasses.replace(base, fmaps=(2, 1)),
    ]
    assert len({search_cache.search_key(ref, c, "cpu") for c in variants}) == len(variants)
    assert len(set(variants)) == len(variants)
    same = mj.SearchConfig(**LIMITS, grids=[list(GRID)])
    assert hash(same) == hash(variants[1]) and same == variants[1]
    assert search_cache.search_key(ref, same, "cpu") == search_cache.search_key(
        ref, variants[1], "cpu"
    )


def test_every_rung_of_a_deepened_search_keeps_the_structure(ref):
    fields = dict(grids=(GRID,), imaps=((0, 1, -1), (0, -1, 2)), omaps=((0, 1, 2),), fmaps=(-1,))
    config = mj.SearchConfig(**{**LIMITS, "max_kernel_ops": 2, "deepen": True}, **fields)
    ladder = deepening.rungs(config)
    assert len(ladder) > 1
    for rung in ladder:
        assert {k: getattr(rung, k) for k in fields} == fields
    result = mj.search(ref, dataclasses.replace(config, max_kernel_ops=1), progress=False)
    found = list(layouts(result))
    assert found and {grid for grid, *_ in found} == {GRID}

"""A program the search fuses nothing of is lifted whole into one kernel, op for op
(mirage_jax/superopt/lift.py): decode attention's scores, mask and softmax over the keys."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    assert_close,
    session_kernel_cache,
    storage_rtol,
)

import mirage_jax as mj
from mirage_jax.ir.decode_graphs import decode_softmax
from mirage_jax.superopt import lift
from mirage_jax.superopt.config import ATTENTION

B, S, N, H = 2, 16, 3, 8  # decode_softmax's defaults
FILL = float(np.finfo(np.float32).min)


def reference(k, q, mask):
    k, q, mask = (np.asarray(x, np.float64) for x in (k, q, mask))
    scores = np.where(mask != 0, (q * k).sum(3, keepdims=True) * H**-0.5, FILL)
    e = np.exp(scores - scores.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def hostile_inputs():
    rng = np.random.default_rng(0)
    k = rng.standard_normal((B, S, N, H))
    k[0, 3] *= 1e4  # logits far beyond exp's range: only the max's subtraction saves them
    q = rng.standard_normal((B, 1, N, H))
    mask = (rng.random((B, S, N, 1)) > 0.3).astype(np.float64)
    mask[1, :, 2] = 0.0  # a fully masked row: uniform weights, as jax.nn.softmax gives
    mask[0, 5:, 0] = 0.0  # padding after the fifth key
    return [jnp.asarray(x, jnp.float32) for x in (k, q, mask)]


def _grid(graph: mj.KernelGraph) -> tuple[int, int, int]:
    return next(o for o in graph.ops if o.kind == "customized").block_graph.grid


def test_decode_softmax_lifts_verifies_and_runs():
    graph = decode_softmax()
    candidates = lift.lifted(graph, cores=2)
    # Split along the batch, then the heads too; never the keys or the head dim (worked).
    assert [_grid(g) for g in candidates] == [(2, 1, 1), (2, 3, 1)]
    inputs = hostile_inputs()
    want = reference(*inputs)
    for lifted in candidates:
        assert mj.verify_equivalent(graph, lifted)
        (got,) = jax.jit(mj.compile(lifted))(*inputs)
        assert np.all(np.isfinite(np.asarray(got)))
        assert_close(got, want, storage_rtol("float32"), f"lifted {_grid(lifted)} vs numpy")
        uniform = np.full((S, 1), 1 / S)
        assert_close(got[1, :, 2], uniform, storage_rtol("float32"), "a fully masked row")


def test_a_second_grid_axis_only_when_the_first_gives_too_few_blocks():
    graph = decode_softmax()
    # B = 2 blocks are two per core on one core; on four, the heads split as far as they go.
    assert [_grid(g) for g in lift.lifted(graph, cores=1)] == [(2, 1, 1)]
    assert [_grid(g) for g in lift.lifted(graph, cores=4)] == [(2, 1, 1), (2, 3, 1)]


def test_every_lifted_op_class_rebuilds_as_it_was():
    # rms_norm (eps), a scalar unary, plain unaries, a binary with broadcasting, a mean and
    # a max: each rebuilt from the core's op table with its attribute. A wrong eps, scalar
    # or reduce kind would fail the verifier or the interpreter comparison.
    g = mj.KernelGraph()
    x = g.new_input((4, 8, 16))
    w = g.new_input((1, 1, 16))
    y = g.mul(g.rms_norm(x, 1e-3), w)
    z = g.relu(g.add_scalar(g.gelu(y), 0.5))  # one exp deep: the verifier needs that
    g.mark_output(g.reduce(z, 1, "mean"))
    g.mark_output(g.reduce(g.neg(z), 2, "max"))
    (lifted,) = lift.lifted(g, cores=1)
    assert _grid(lifted) == (4, 1, 1)  # dims 1 and 2 are reduced or normalized over
    assert mj.verify_equivalent(g, lifted)
    rng = np.random.default_rng(3)
    inputs = [jnp.asarray(rng.standard_normal(t.shape), jnp.float32) for t in g.inputs]
    inputs[0] = inputs[0].at[1].set(0.0)  # an all-zero row: rms_norm's eps alone divides
    got = jax.jit(mj.compile(lifted))(*inputs)
    for i, (a, b) in enumerate(zip(got, g.evaluate(inputs), strict=True)):
        assert_close(a, b, storage_rtol("float32"), f"output {i} vs the interpreter")


def test_splitting_a_worked_dim_is_rejected_by_the_verifier():
    # The softmax's keys split over blocks: each block normalizes its own half. The same
    # construction with a wrong dim must fail verification, as search.py checks every lift.
    graph = decode_softmax()
    wrong = lift._lift(graph, dims=[1], grid=(2,))
    assert not mj.verify_equivalent(graph, wrong)


def test_programs_that_are_not_lifted():
    g = mj.KernelGraph()
    x, w = g.new_input((4, 8)), g.new_input((8, 16))
    g.mark_output(g.exp(g.matmul(x, w)))
    assert lift.lifted(g, cores=2) == []  # a matmul: the search's to fuse
    g = mj.KernelGraph()
    x = g.new_input((4, 8))
    g.mark_output(g.reduce(g.reduce(g.exp(x), 0, "sum"), 1, "sum"))
    assert lift.lifted(g, cores=2) == []  # every dim is reduced
    g = mj.KernelGraph()
    x, c = g.new_input((4, 8)), g.new_input((8,))
    g.mark_output(g.add(x, c))
    assert lift.lifted(g, cores=2) == []  # ranks differ


def test_a_lift_the_ir_refuses_is_left_out(monkeypatch):
    def refused(*_):
        raise ValueError("refused by the IR's rules")

    monkeypatch.setattr(lift, "_lift", refused)
    assert lift.lifted(decode_softmax(), cores=2) == []


def test_search_returns_the_lift_when_it_fuses_nothing():
    graph = decode_softmax()
    # ATTENTION's 5 block ops cannot hold the 9 ops, so the search itself fuses nothing.
    config = dataclasses.replace(ATTENTION, time_budget_s=1.0)
    result = mj.search(graph, config, progress=False)
    fused = [c for c in result.candidates if any(o.kind == "customized" for o in c.ops)]
    assert fused, result.reason
    assert "lifted whole into one kernel" in result.parts
    inputs = hostile_inputs()
    (got,) = jax.jit(mj.compile(fused[0]))(*inputs)
    assert_close(got, reference(*inputs), storage_rtol("float32"), "searched lift vs numpy")


def test_no_lift_where_the_caller_fixed_the_structure():
    # A lift chooses its own grid; a caller who gave grids or maps gets only those.
    config = dataclasses.replace(ATTENTION, time_budget_s=1.0, grids=((2,),))
    result = mj.search(decode_softmax(), config, progress=False)
    assert "lifted" not in result.parts
    for c in result.candidates:
        for op in c.ops:
            assert op.kind != "customized" or op.block_graph.grid == (2, 1, 1)

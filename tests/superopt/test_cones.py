"""A program whose outputs share no matmul is searched one group of outputs at a time, and
candidates for the groups are joined (mirage_jax/superopt/cones.py): a decode step's q, k and
v projections of one RMS-normed activation, with rotary factors on q and k. The search of the
whole fuses nothing; the joins fuse every projection, verify against the whole, and run."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    session_kernel_cache,
    storage_rtol,
)

import mirage_jax as mj
from mirage_jax import _core
from mirage_jax.superopt import calibration_cache, cones
from mirage_jax.superopt import search as search_module
from mirage_jax.superopt.parts import fuses

T, D, DQ, DK = 4, 64, 64, 16
EPS = 1e-6


def projections() -> mj.KernelGraph:
    """x [T, D] normed (x * rsqrt(mean(x^2) + eps) * scale), times wq, wk, wv; outputs q,
    k, v, q * rq and k * rk (the rotary factors, elementwise)."""
    kg = mj.KernelGraph()
    x = kg.new_input((T, D))
    scale = kg.new_input((1, D))
    wq, wk, wv = kg.new_input((D, DQ)), kg.new_input((D, DK)), kg.new_input((D, DK))
    rq, rk = kg.new_input((T, DQ)), kg.new_input((T, DK))
    ms = kg.add_scalar(kg.reduce(kg.square(x), 1, "mean"), EPS)
    n = kg.mul(kg.mul(x, kg.rsqrt(ms)), scale)
    q, k, v = kg.matmul(n, wq), kg.matmul(n, wk), kg.matmul(n, wv)
    for t in (q, k, v, kg.mul(q, rq), kg.mul(k, rk)):
        kg.mark_output(t)
    return kg


def reference(x, scale, wq, wk, wv, rq, rk):
    x, scale, wq, wk, wv, rq, rk = (
        np.asarray(a, np.float64) for a in (x, scale, wq, wk, wv, rq, rk)
    )
    n = x / np.sqrt((x * x).mean(1, keepdims=True) + EPS) * scale
    q, k, v = n @ wq, n @ wk, n @ wv
    return q, k, v, q * rq, k * rk


def magnitudes(x, scale, wq, wk, wv, rq, rk):
    """Per output element, the sum of its products' magnitudes: the scale of a float32
    dot's rounding error, whatever order a kernel sums in (a result that cancels to near
    zero carries the error of its terms)."""
    x, scale, wq, wk, wv, rq, rk = (
        np.abs(np.asarray(a, np.float64)) for a in (x, scale, wq, wk, wv, rq, rk)
    )
    n = x / np.sqrt((x * x).mean(1, keepdims=True) + EPS) * scale
    q, k, v = n @ wq, n @ wk, n @ wv
    return q, k, v, q * rq, k * rk


def hostile_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, D))
    x[1] *= 1e3  # a row whose squares would overflow float16, not float32: the norm rescales it
    x[2] = 0.0  # an all-zero row: rsqrt(eps), times zeros
    args = [x, rng.standard_normal((1, D)) + 1.0]
    args += [rng.standard_normal(s) / np.sqrt(D) for s in ((D, DQ), (D, DK), (D, DK))]
    args += [rng.standard_normal((T, DQ)), rng.standard_normal((T, DK))]
    return [jnp.asarray(a, jnp.float32) for a in args]


def test_outputs_are_grouped_by_their_matmuls():
    groups = [tuple(c.outputs) for c in cones.output_cones(projections())]
    assert groups == [(0, 3), (1, 4), (2,)]


def _check_runs(graph: mj.KernelGraph, candidate: mj.KernelGraph) -> None:
    assert mj.verify_equivalent(graph, candidate)
    inputs = hostile_inputs()
    want, scale = reference(*inputs), magnitudes(*inputs)
    got = jax.jit(mj.compile(candidate))(*inputs)
    for i, (g, w, m) in enumerate(zip(got, want, scale, strict=True)):
        g = np.asarray(g, np.float64)
        assert np.all(np.isfinite(g)), i
        err, bound = np.abs(g - w), storage_rtol("float32") * m
        worst = np.unravel_index(np.argmax(err - bound), err.shape)
        assert err[worst] <= bound[worst], (i, worst, g[worst], w[worst], m[worst])


def test_joined_cones_fuse_every_projection_verify_and_run():
    graph = projections()
    found = cones.output_cones(graph)
    config = mj.SearchConfig().for_graph(graph)
    target = calibration_cache.cpu_target()[0]
    joined = cones.search_cones(
        graph, found, config, 6.0, target, lambda g, c: mj.search(g, c, progress=False)
    )
    assert joined.candidates, joined.note
    assert joined.costs == sorted(joined.costs)
    # each projection's cone fuses; every join fuses some cone (at these sizes the cost
    # model may rank a small cone's XLA matmul first, so not every join fuses all three)
    assert all(any(map(fuses, r.candidates)) for r in joined.results), joined.note
    assert all(fuses(g) for g in joined.candidates)
    kernels = max(joined.candidates, key=lambda g: sum(op.kind == "customized" for op in g.ops))
    for candidate in {id(g): g for g in (joined.candidates[0], kernels)}.values():
        _check_runs(graph, candidate)


def test_search_turns_to_the_cones_when_the_whole_fuses_nothing(monkeypatch):
    """Whether the whole's own search fuses anything in its share of the budget depends on
    the machine's speed: here it is made to find nothing, so that the turn to the cones is
    what is tested."""
    graph = projections()
    real_run = search_module._run

    def whole_fuses_nothing(g, config, hook, target):
        result = real_run(g, config, hook, target)
        if g.hash() != graph.hash():
            return result
        kept = [(c, cost) for c, cost in zip(result.candidates, result.costs) if not fuses(c)]
        return dataclasses.replace(
            result, candidates=[c for c, _ in kept], costs=[cost for _, cost in kept]
        )

    monkeypatch.setattr(search_module, "_run", whole_fuses_nothing)
    config = dataclasses.replace(mj.SearchConfig().for_graph(graph), time_budget_s=6.0)
    result = mj.search(graph, config, progress=False)
    assert result.parts.startswith(
        "each group of its outputs was searched (nothing fused the whole program;"
    ), result.parts
    assert "cone 2:" in result.parts, result.parts
    fused = [g for g in result.candidates if fuses(g)]
    assert fused, result.parts
    _check_runs(graph, fused[0])


def test_a_wrong_cone_candidate_is_rejected_by_the_verifier():
    graph = projections()
    found = cones.output_cones(graph)
    wrong = mj.KernelGraph._wrap(found[1].program)
    # k's cone with its factor applied before the matmul's result is stored: k * rk twice
    x, scale, wk, rk = wrong.inputs
    bad = mj.KernelGraph()
    ins = [bad.new_input(t.shape) for t in (x, scale, wk, rk)]
    ms = bad.add_scalar(bad.reduce(bad.square(ins[0]), 1, "mean"), EPS)
    n = bad.mul(bad.mul(ins[0], bad.rsqrt(ms)), ins[1])
    k = bad.mul(bad.matmul(n, ins[2]), ins[3])
    bad.mark_output(k)
    bad.mark_output(bad.mul(k, ins[3]))
    right = [c.program for c in found]
    assert mj.verify_equivalent(
        graph, mj.KernelGraph._wrap(_core.join_cones(graph._core, found, right))
    )
    joined = _core.join_cones(graph._core, found, [right[0], bad._core, right[2]])
    assert not mj.verify_equivalent(graph, mj.KernelGraph._wrap(joined))

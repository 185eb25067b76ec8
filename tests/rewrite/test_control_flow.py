"""@mirage_jax.optimize inside control flow (mirage_jax/rewrite/control_flow.py): the regions
of scan and while bodies and of cond branches become kernels that run inside them (layers
under `scan`, a decode loop under `fori_loop` or `while_loop`, loops within loops, a step
under `lax.cond`), with jax.grad and jax.vmap through them; a body that fails to rewrite, or
that the timing rejects, runs as its own. Every result is compared with jax.jit of the same
function."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import kernels_always_win, normwise  # noqa: F401

import mirage_jax as mj
from mirage_jax.frontend import partition
from mirage_jax.rewrite import control_flow, decorator, whole_program
from mirage_jax.rewrite.control_flow import budget_shares

REL = 1e-5  # float32, normwise: a kernel and XLA differ by accumulation order only
LAYERS, BATCH, DIM = 3, 8, 256


def layer(x, g, w):
    """A residual RMSNorm + Linear: the body's one region."""
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    return x + h @ w


def scanned(x, gs, ws):
    return jax.lax.scan(lambda x, p: (layer(x, *p), None), x, (gs, ws))[0]


def looped(x, g, w, n):
    """A while loop whose trip count is an argument (as a sampler's stop condition)."""
    return jax.lax.while_loop(
        lambda s: s[0] < n, lambda s: (s[0] + 1, layer(s[1], g, w)), (jnp.int32(0), x)
    )[1]


def nested(x, gs, ws, n):
    """A dynamic fori_loop (a while loop) around a scan over the layers."""
    return jax.lax.fori_loop(0, n, lambda i, x: scanned(x, gs, ws), x)


def stacked(seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((BATCH, DIM)), jnp.float32)
    gs = jnp.asarray(1 + 0.1 * rng.standard_normal((LAYERS, DIM)), jnp.float32)
    ws = jnp.asarray(rng.standard_normal((LAYERS, DIM, DIM)) / 16, jnp.float32)
    return x, gs, ws


def kernel_calls(fn, *args) -> int:
    return jax.jit(fn).lower(*args).as_text().count("mirage_jax_cpu")


def test_a_scan_over_layers_runs_its_body_as_kernels(kernels_always_win):
    x, gs, ws = stacked()
    f = mj.optimize(scanned)
    got = f(x, gs, ws)
    assert normwise(got, jax.jit(scanned)(x, gs, ws)) < REL
    assert f.uses_kernels(x, gs, ws)
    assert kernel_calls(f, x, gs, ws) == 1  # once, in the body
    (report,) = f.regions(x, gs, ws)
    assert report.chosen == "kernel" and "in the scan body at" in report.reason
    assert "dot_general" in report.primitives
    assert "scan body at" in f.explain(x, gs, ws)


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_a_while_loop_whose_trip_count_is_an_argument(kernels_always_win, trips):
    x, gs, ws = stacked(1)
    g, w = gs[0], ws[0]
    f = mj.optimize(looped)
    n = jnp.int32(trips)
    got = f(x, g, w, n)
    assert normwise(got, jax.jit(looped)(x, g, w, n)) < REL
    assert f.uses_kernels(x, g, w, n) and kernel_calls(f, x, g, w, n) == 1


def test_loops_within_loops(kernels_always_win):
    x, gs, ws = stacked(2)
    x = x / 4  # two passes over three layers grow the activations 8-fold at most
    f = mj.optimize(nested)
    n = jnp.int32(2)
    assert normwise(f(x, gs, ws, n), jax.jit(nested)(x, gs, ws, n)) < REL
    assert f.uses_kernels(x, gs, ws, n) and kernel_calls(f, x, gs, ws, n) == 1
    (report,) = f.regions(x, gs, ws, n)
    assert report.reason.startswith("in the while body at")


def branched(x, g, w, skip):
    """A step skipped under a condition (a sampler's finished rows), then a reduction."""
    return jax.lax.cond(skip, lambda x: x, lambda x: layer(x, g, w), x)


@pytest.mark.parametrize("skip", [False, True])
def test_a_cond_runs_its_branches_kernels(kernels_always_win, skip):
    x, gs, ws = stacked(9)
    g, w = gs[0], ws[0]
    f = mj.optimize(branched)
    flag = jnp.bool_(skip)
    assert normwise(f(x, g, w, flag), jax.jit(branched)(x, g, w, flag)) < REL
    assert f.uses_kernels(x, g, w, flag) and kernel_calls(f, x, g, w, flag) == 1
    (report,) = f.regions(x, g, w, flag)
    assert report.chosen == "kernel"
    assert report.reason.startswith("in the cond branch 0 (false) at"), report.reason


def test_grad_and_vmap_through_a_rewritten_scan(kernels_always_win):
    x, gs, ws = stacked(3)
    f = mj.optimize(scanned)
    cotangent = jnp.asarray(np.random.default_rng(4).standard_normal(x.shape), jnp.float32)

    def loss(fn):
        return lambda x, gs, ws: jnp.sum(cotangent * fn(x, gs, ws))

    got = jax.grad(loss(f), argnums=(0, 1, 2))(x, gs, ws)
    want = jax.grad(loss(scanned), argnums=(0, 1, 2))(x, gs, ws)
    for a, b in zip(got, want):
        assert a.shape == b.shape and normwise(a, b) < REL
    xs = jnp.stack([x, -x])
    batched = jax.vmap(f, in_axes=(0, None, None))(xs, gs, ws)
    assert normwise(batched, jax.vmap(scanned, in_axes=(0, None, None))(xs, gs, ws)) < REL


def test_a_body_that_fails_to_rewrite_runs_as_its_own(kernels_always_win, monkeypatch):
    rewrite = decorator._rewrite

    def failing_in_bodies(closed, out_shapes, sig, plain, settings, name="function", memo=None):
        if "scan body" in name:
            raise RuntimeError("injected: the body cannot be rewritten")
        return rewrite(closed, out_shapes, sig, plain, settings, name, memo)

    monkeypatch.setattr(decorator, "_rewrite", failing_in_bodies)
    x, gs, ws = stacked(5)
    f = mj.optimize(scanned)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = f(x, gs, ws)
    assert normwise(got, jax.jit(scanned)(x, gs, ws)) < REL
    messages = [str(w.message) for w in record]
    assert any(
        "scan body at" in m and "runs as jax.jit, not rewritten" in m and "injected" in m
        for m in messages
    ), messages
    assert not f.uses_kernels(x, gs, ws) and kernel_calls(f, x, gs, ws) == 0


def test_a_body_the_timing_rejects_keeps_its_own_and_says_so(kernels_always_win, monkeypatch):
    # each region's kernel wins its own timing; the body as a whole is then found slower
    monkeypatch.setattr(whole_program, "choose", lambda *_, **__: (None, "slower (injected)"))
    x, gs, ws = stacked(6)
    f = mj.optimize(scanned)
    assert normwise(f(x, gs, ws), jax.jit(scanned)(x, gs, ws)) < REL
    assert not f.uses_kernels(x, gs, ws) and kernel_calls(f, x, gs, ws) == 0
    (report,) = f.regions(x, gs, ws)
    assert report.chosen == "xla"
    assert "the body as a whole was not faster with its kernels" in report.reason


def test_loop_bodies_share_the_function_budget_by_region_count():
    def prefill_then_loop(x, gs, ws):
        return scanned(layer(x, gs[0], ws[0]), gs, ws)  # one region outside, one in the body

    def prefill_then_nested(x, gs, ws, n):
        return nested(layer(x, gs[0], ws[0]), gs, ws, n)  # the while body holds only a scan

    def shares(f, *args):
        part = partition(jax.make_jaxpr(f)(*args))
        (loop,) = [n for n in part.program.nodes if n.name in ("scan", "while")]
        return budget_shares(part, 20.0, {}), loop.index

    x, gs, ws = stacked(7)
    got, loop = shares(prefill_then_loop, x, gs, ws)
    assert got == {-1: 10.0, loop: 10.0}
    got, loop = shares(scanned, x, gs, ws)
    assert got == {-1: 0.0, loop: 20.0}
    # the while body's own program has no region; the scan inside it has one
    got, loop = shares(prefill_then_nested, x, gs, ws, jnp.int32(2))
    assert got == {-1: 10.0, loop: 10.0}


def test_each_body_is_partitioned_once(kernels_always_win, monkeypatch):
    """The budget counts the regions of every body before any is rewritten; the rewrites
    reuse those partitions."""
    seen = []
    real = control_flow.partition

    def counted(closed):
        seen.append(id(closed))
        return real(closed)

    monkeypatch.setattr(control_flow, "partition", counted)
    x, gs, ws = stacked(10)
    f = mj.optimize(nested)
    n = jnp.int32(2)
    assert normwise(f(x, gs, ws, n), jax.jit(nested)(x, gs, ws, n)) < REL
    assert f.uses_kernels(x, gs, ws, n)
    assert len(seen) == 3 and len(set(seen)) == 3  # the function, the while body, the scan body


def test_a_program_with_side_effects_is_not_timed_again(monkeypatch):
    """Timing runs the rewritten program and jax.jit's over and over: a callback (here in a
    loop body) would run each time. Kernels that won their regions run; nothing is repeated."""
    from mirage_jax.runtime import profile

    def run_each_once(functions, args, **_):  # a timing that runs what it times
        for fn in functions.values():
            jax.block_until_ready(fn(*args))
        return {name: (1.0 if name == "xla" else 0.5) for name in functions}, 1

    monkeypatch.setattr(profile, "median_times", run_each_once)
    calls = []

    def noisy(x, g, w, n):
        def body(i, x):
            jax.debug.callback(lambda i: calls.append(int(i)), i)
            return layer(x, g, w)

        return jax.lax.fori_loop(0, n, body, x)

    x, gs, ws = stacked(8)
    f = mj.optimize(noisy)
    n = jnp.int32(3)
    got = f(x, gs[0], ws[0], n)
    assert calls == [0, 1, 2]  # the user's call, and no timing's
    calls.clear()
    assert normwise(got, jax.jit(noisy)(x, gs[0], ws[0], n)) < REL and calls == [0, 1, 2]
    assert f.uses_kernels(x, gs[0], ws[0], n) and kernel_calls(f, x, gs[0], ws[0], n) == 1
    assert "side effects (prints, callbacks) that timing would repeat" in f.explain(
        x, gs[0], ws[0], n
    )

"""The function's optimization budget (mirage_jax/rewrite/budget.py): regions XLA already
runs near the roofline bound are not searched, the budget is planned by expected gain,
identical regions are optimized once, a spent budget leaves the rest to XLA, and estimates
are kept in the cache."""

import jax
import jax.numpy as jnp
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import inputs, kernels_always_win, normwise, rmsnorm_linear  # noqa: F401

import mirage_jax as mj
from mirage_jax.ir.product_graphs import column_split_product
from mirage_jax.rewrite import budget, estimate_cache
from mirage_jax.rewrite import region as _optimize_region


def two_layers(x, g, w1, w2):
    """Two regions of the same graph (a layer applied twice) and nothing else."""
    h = rmsnorm_linear(x, g, w1)
    return rmsnorm_linear(jnp.cumsum(h, axis=-1), g, w2)  # cumsum: not a region op


def layer_inputs():
    x, g, w = inputs()
    return x, g, w[:, :64].repeat(4, axis=1), w[:, :64].repeat(4, axis=1) * 0.5


def counting(monkeypatch):
    calls = []
    real = _optimize_region.superoptimize

    def counted(kg, *args, **kwargs):
        calls.append(kg.hash())
        return real(kg, *args, **kwargs)

    monkeypatch.setattr(_optimize_region, "superoptimize", counted)
    return calls


def test_a_region_xla_runs_at_the_bound_is_not_searched(monkeypatch):
    calls = counting(monkeypatch)
    monkeypatch.setattr(
        budget, "estimate", lambda kg, flops, backend, cold=False: budget.Estimate(1e-3, 0.95e-3)
    )
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    assert normwise(f(x, g, w), jax.jit(rmsnorm_linear)(x, g, w)) < 1e-6
    (report,) = f.regions(x, g, w)
    assert report.chosen == "xla" and "not searched" in report.reason
    assert "within 10% of the bound" in report.reason and calls == []
    # a gain too small to pay a kernel's dispatch is not searched either
    _optimize_region.forget()
    monkeypatch.setattr(
        budget, "estimate", lambda kg, flops, backend, cold=False: budget.Estimate(1e-5, 0.0)
    )
    g2 = mj.optimize(rmsnorm_linear)
    (report,) = g2.regions(x, g, w)
    assert "a gain under 20 µs" in report.reason and calls == []


def test_identical_regions_are_optimized_once(kernels_always_win, monkeypatch):
    calls = counting(monkeypatch)
    f = mj.optimize(two_layers)
    args = layer_inputs()
    got = f(*args)
    assert normwise(got, jax.jit(two_layers)(*args)) < 1e-5
    reports = f.regions(*args)
    assert len(reports) == 2 and [r.chosen for r in reports] == ["kernel", "kernel"]
    assert len(calls) == 1  # the second layer's region reused the first's result


def test_the_memo_keeps_the_most_recently_used_regions_only(kernels_always_win, monkeypatch):
    calls = counting(monkeypatch)
    monkeypatch.setattr(_optimize_region, "MEMO_ENTRIES", 1)
    x, g, w = inputs()
    for f in (rmsnorm_linear, lambda x, g, w: rmsnorm_linear(x[:4], g, w), rmsnorm_linear):
        mj.optimize(f)(x, g, w)
    # two graphs, one memo entry: the second evicted the first, which the third call then
    # superoptimized again
    assert len(calls) == 3 and len(_optimize_region._SUPEROPTIMIZED) == 1
    mj.optimize(rmsnorm_linear)(x, g, w)
    assert len(calls) == 3  # the most recent one is still remembered


def test_a_spent_budget_leaves_the_remaining_regions_to_xla(kernels_always_win, monkeypatch):
    calls = counting(monkeypatch)
    overruns = iter([False])  # the first region is on time; after it, the run is overrun
    monkeypatch.setattr(budget.FunctionBudget, "overrun", lambda self: next(overruns, True))

    def different(x, g, w1, w2):  # two regions of different graphs
        return rmsnorm_linear(x, g, w1), rmsnorm_linear(x[:4], g, w2)

    f = mj.optimize(different, budget_s=5)
    args = layer_inputs()
    got, want = f(*args), jax.jit(different)(*args)
    assert all(normwise(a, b) < 1e-5 for a, b in zip(got, want))
    chosen = sorted(r.chosen for r in f.regions(*args))
    assert chosen == ["kernel", "xla"] and len(calls) == 1
    (spent,) = [r for r in f.regions(*args) if r.chosen == "xla"]
    assert "optimization budget (5 s, optimize(budget_s=)) was spent" in spent.reason


def test_the_plan_shares_the_budget_by_gain_in_fixed_steps():
    plan = budget.plan([3.0, 1.0, 0.0], 40.0, [60.0, 60.0, 2.0])
    assert [a.search_s for a in plan] == [15.0, 4.0, 1.0]  # 15 of 40*0.75*0.5, 5 -> 4, floor
    assert [a.top_k for a in plan] == [4, 2, 1]  # 15 s, 5 s, 0 s left for candidates
    assert budget.plan([1.0], 1000.0, [5.0])[0].search_s == 5.0  # the config's cap, exactly
    # no gain known (estimates failed): equal shares, 8 s · ½ each · ½ for the search
    assert [a.search_s for a in budget.plan([0.0, 0.0], 8.0, [60.0, 60.0])] == [2.0, 2.0]
    assert budget.search_step(0.2) == 1.0 and budget.search_step(29.9) == 15.0


def test_estimates_are_kept_per_machine_and_loaded_by_the_next_process(monkeypatch, tmp_path):
    monkeypatch.setenv("MIRAGE_JAX_VERDICTS", "1")
    measured = []
    real = budget.estimate

    def counted(kg, flops, backend, cold=False):
        measured.append(kg.hash())
        return real(kg, flops, backend, cold)

    monkeypatch.setattr(budget, "estimate", counted)
    x, g, w = inputs()
    mj.optimize(rmsnorm_linear, cache_dir=tmp_path, min_region_flops=0).regions(x, g, w)
    _optimize_region.forget()  # as a new process would start
    mj.optimize(rmsnorm_linear, cache_dir=tmp_path).regions(x, g, w)
    assert len(measured) == 1
    (entry,) = [p for p in (tmp_path / "estimates").iterdir() if p.name != ".locks"]
    assert estimate_cache.problem(entry) is None
    (entry / "estimate.json").write_text('{"xla_s": -1}')  # damaged: measured again
    assert estimate_cache.problem(entry) is not None
    _optimize_region.forget()
    mj.optimize(rmsnorm_linear, cache_dir=tmp_path).regions(x, g, w)
    assert len(measured) == 2


def test_bfloat16_regions_are_bounded_at_a_generated_bfloat16_products_rate(monkeypatch):
    # XLA's float32 matmul rate would call a region XLA runs at that rate unwinnable, where
    # the CPU kernels multiply bfloat16 on AMX tiles several times faster.
    xla = budget.MachineRates(flops_per_s=1e11, bytes_per_s=1e12)
    monkeypatch.setattr(budget, "machine_rates", lambda platform="cpu": xla)
    monkeypatch.setattr(budget, "bf16_flops_per_s", lambda platform="cpu": 4e11)
    flops = 2 * 64 * 256 * 128
    for dtype, rate in (("float32", 1e11), ("bfloat16", 4e11)):
        kg = column_split_product(64, 256, 128, 1, 256, dtype, dtype)
        assert budget.estimate(kg, flops, "cpu").bound_s == pytest.approx(flops / rate)


def test_the_bfloat16_rate_is_a_generated_bfloat16_products(monkeypatch):
    timed = []

    def fastest(fn, args, runs=3):
        timed.append([(a.shape, a.dtype) for a in args])
        jax.block_until_ready(fn(*args))  # the compiled kernel runs
        return 1e-3

    monkeypatch.setattr(budget._profile, "fastest_seconds", fastest)
    monkeypatch.setattr(budget, "machine_rates", lambda p="cpu": budget.MachineRates(1e9, 1e12))
    m, k, n, _ = budget.PREFILL_PROJECTION
    assert budget.bf16_flops_per_s.__wrapped__("cpu") == pytest.approx(2 * m * k * n / 1e-3)
    assert timed == [[((m, k), jnp.bfloat16), ((k, n), jnp.bfloat16)]]
    # never below XLA's own float32 rate, and XLA's alone where kernels are not generated here
    monkeypatch.setattr(budget, "machine_rates", lambda p="cpu": budget.MachineRates(1e15, 1e12))
    assert budget.bf16_flops_per_s.__wrapped__("cpu") == 1e15
    assert budget.bf16_flops_per_s.__wrapped__("gpu") == 1e15 and len(timed) == 2


@pytest.mark.parametrize("bad", [0, -1, float("inf"), True, "20"])
def test_bad_budgets_are_refused(bad):
    with pytest.raises(ValueError, match="budget_s must be a positive number"):
        mj.optimize(rmsnorm_linear, budget_s=bad)

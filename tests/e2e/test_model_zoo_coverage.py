"""The matmul coverage probe (benchmarks/models/coverage.py): it finds every matmul of each
zoo model and says whether it lands in a region that converts to a μGraph, and why not.

Issue 13's target is asserted per model: every matmul of every zoo model in a converting
region."""

import jax
import jax.extend.core as jcore
import jax.numpy as jnp
import numpy as np
import pytest
from zoo_support import CASES, import_benchmark_module, zoo_case

# Sub-jaxpr parameters of call-like primitives and loops; one per equation (custom_vjp_call
# holds the same body under two names).
_SUB_JAXPRS = ("jaxpr", "call_jaxpr", "fun_jaxpr", "body_jaxpr")


def _count_matmuls(jaxpr) -> int:
    """dot_general and conv_general_dilated equations, nested calls and conds included."""
    n = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("dot_general", "conv_general_dilated"):
            n += 1
        for branch in eqn.params.get("branches", ()):
            n += _count_matmuls(branch.jaxpr)
        for key in _SUB_JAXPRS:
            sub = eqn.params.get(key)
            if isinstance(sub, jcore.ClosedJaxpr):
                sub = sub.jaxpr
            if isinstance(sub, jcore.Jaxpr):
                n += _count_matmuls(sub)
                break
    return n


@pytest.fixture(scope="module")
def coverage():
    return import_benchmark_module("models.coverage")


def test_probe_sees_a_converting_matmul_and_names_why_another_does_not(coverage):
    rng = np.random.default_rng(0)
    x2 = jnp.asarray(rng.standard_normal((8, 32)), jnp.float32)
    x3 = jnp.asarray(rng.standard_normal((2, 8, 32)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((32, 16)), jnp.float32)

    def rank2(x, w):
        return jax.nn.softmax(x @ w, axis=-1)

    good = coverage.probe_function("rank2", rank2, (x2, w))
    assert [(m.converts, m.region) for m in good.matmuls] == [(True, 0)]
    assert good.fraction == 1.0 and good.converting_regions == good.regions == 1
    assert good.matmuls[0].lhs == "float32[8,32]" and good.matmuls[0].out == "float32[8,16]"

    # rank-3 activations fold their leading dims into the matmul's rows
    folded = coverage.probe_function("rank3", rank2, (x3, w))
    assert [(m.converts, m.region) for m in folded.matmuls] == [(True, 0)]
    assert "(((2,), (0,)), ((), ()))" in folded.matmuls[0].params

    def integer(x, w):
        return jax.nn.softmax((x.astype(jnp.int32) @ w.astype(jnp.int32)).astype(x.dtype))

    bad = coverage.probe_function("integer", integer, (x3, w))
    assert bad.fraction == 0.0
    (m,) = bad.matmuls
    assert not m.converts and m.region is None
    assert m.reason.startswith("outside every region: dot_general: operand ")
    assert "of dtype int32 (kernels take ('float32', 'bfloat16', 'float16'))" in m.reason
    assert list(bad.reasons().values()) == [1]  # one reason (its names of values normalized)


def test_probe_descends_into_loops_and_conds(coverage):
    """optimize rewrites loop bodies and cond branches as programs of their own: the probe
    counts their matmuls, each in a region of its own number."""
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((8, 32)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((32, 32)), jnp.float32)

    def controlled(x, w, flag):
        x = jax.lax.fori_loop(0, 2, lambda i, x: jax.nn.softmax(x @ w, axis=-1), x)
        return jax.lax.cond(flag, lambda x: jnp.tanh(x @ w), lambda x: x, x)

    args = (x, w, jnp.bool_(True))
    cov = coverage.probe_function("controlled", controlled, args)
    assert _count_matmuls(jax.make_jaxpr(controlled)(*args).jaxpr) == len(cov.matmuls) == 2
    assert [m.converts for m in cov.matmuls] == [True, True]
    assert sorted(m.region for m in cov.matmuls) == [0, 1] and cov.regions == 2


def test_probe_names_the_region_that_does_not_convert(coverage):
    """A rank-2 matmul whose region also computes jnp.var: the region is rejected today, and
    the matmul's reason is the region's."""
    x = jnp.ones((8, 32), jnp.float32)
    w = jnp.ones((32, 16), jnp.float32)

    def matmul_var(x, w):
        h = x @ w
        return (h - jnp.mean(h, -1, keepdims=True)) / jnp.sqrt(jnp.var(h, -1, keepdims=True) + 1e-5)

    cov = coverage.probe_function("matmul_var", matmul_var, (x, w))
    (m,) = cov.matmuls
    if m.converts:  # the frontend learned jnp.var: the probe must say so, consistently
        assert cov.fraction == 1.0 and not cov.region_failures
    else:
        assert m.region is not None and m.reason.startswith("in a region that does not convert: ")
        assert [r for _, _, r in cov.region_failures] == [m.reason]


@pytest.mark.parametrize("name", CASES)
def test_probe_accounts_for_every_matmul_of_each_zoo_model(name, coverage):
    case = zoo_case(name, "f32")
    cov = coverage.probe(case)
    expected = _count_matmuls(jax.make_jaxpr(case.fn)(*case.args()).jaxpr)
    assert expected > 0 and len(cov.matmuls) == expected
    assert 0.0 <= cov.fraction <= 1.0
    assert cov.fraction == sum(m.converts for m in cov.matmuls) / len(cov.matmuls)
    for m in cov.matmuls:
        assert m.converts == (m.reason == ""), m
        assert m.region is None or 0 <= m.region < cov.regions, m
    assert 0 <= cov.converting_regions <= cov.regions
    assert sum(cov.reasons().values()) == sum(not m.converts for m in cov.matmuls)
    text = coverage.report([cov])
    assert f"| {name} | {len(cov.matmuls)} |" in text


@pytest.mark.parametrize("name", CASES)
def test_every_matmul_of_each_zoo_model_is_in_a_converting_region(name, coverage):
    cov = coverage.probe(zoo_case(name, "f32"))
    assert cov.fraction == 1.0, coverage.report([cov])

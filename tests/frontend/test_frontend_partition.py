"""The JAX frontend's partitioning and region -> KernelGraph conversion."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mirage_jax.frontend import partition, region_to_graph
from mirage_jax.frontend.flat import run_nodes


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _check_region(region, values, kinds=None):
    """The region's KernelGraph evaluates (float64) to what jax computes for its nodes."""
    rg = region_to_graph(region)
    want = [np.asarray(w) for w in region.evaluate(*values)]
    got = rg.finish_outputs(rg.graph.evaluate(rg.prepare_inputs(values)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)
    if kinds is not None:
        ops = str(rg.graph)
        for k in kinds:
            assert k in ops, (k, ops)
    return rg


def _whole(f, *args):
    part = partition(jax.make_jaxpr(f)(*args))
    # The flattened program agrees with jax.jit(f).
    for a, b in zip(part.program.evaluate(*args), jax.tree_util.tree_leaves(jax.jit(f)(*args))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    return part


def rms_norm_matmul(x, g, w):
    v = jnp.mean(x * x, axis=-1, keepdims=True)
    return (x * jax.lax.rsqrt(v + 1e-6) * g) @ w


def test_rms_norm_matmul_is_one_region():
    rng = np.random.default_rng(0)
    args = (_rand(rng, 8, 64), _rand(rng, 64), _rand(rng, 64, 32))
    part = _whole(rms_norm_matmul, *args)
    assert len(part.regions) == 1
    (r,) = part.regions
    assert len(r.nodes) == len(part.program.nodes)
    assert r.inputs == part.program.invars
    assert r.outputs == part.program.outvars
    assert any("test_frontend_partition.py" in s for s in r.sources)
    rg = _check_region(r, args, kinds=["mean", "rsqrt", "matmul"])
    want = np.asarray(jax.jit(rms_norm_matmul)(*args))
    got = rg.finish_outputs(rg.graph.evaluate(rg.prepare_inputs(args)))[0]
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def linen_layer_norm_matmul(x, w):
    """flax.linen.LayerNorm's statistics: E[x^2] - E[x]^2, clamped at 0 by jnp.maximum."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.maximum(0.0, jnp.mean(x * x, axis=-1, keepdims=True) - mean * mean)
    return ((x - mean) * jax.lax.rsqrt(var + 1e-6)) @ w


def test_a_variance_clamped_at_zero_stays_in_its_region_as_relu():
    rng = np.random.default_rng(0)
    x = _rand(rng, 8, 64)
    x[1] = 7.0  # constant row: E[x^2] - E[x]^2 rounds to a tiny negative, clamped to 0
    args = (x, _rand(rng, 64, 32))
    part = _whole(linen_layer_norm_matmul, *args)
    assert len(part.regions) == 1 and not part.unsupported
    (r,) = part.regions
    assert len(r.nodes) == len(part.program.nodes)
    _check_region(r, args, kinds=["relu", "rsqrt", "matmul"])


def gated_mlp(x, w1, w3):
    return jax.nn.silu(x @ w1) * (x @ w3)


def test_silu_gated_mlp():
    rng = np.random.default_rng(1)
    args = (_rand(rng, 4, 32), _rand(rng, 32, 16), _rand(rng, 32, 16))
    part = _whole(gated_mlp, *args)
    assert len(part.regions) == 1
    (r,) = part.regions
    assert "logistic" in r.primitives  # the silu jit was inlined
    rg = _check_region(r, args, kinds=["silu", "matmul"])
    assert "sigmoid" not in str(rg.graph)
    assert [gi.index for gi in rg.inputs] == [0, 1, 2]


def attention(q, k, v):
    d = q.shape[-1]
    return jax.nn.softmax(q @ k.T / jnp.sqrt(d), axis=-1) @ v


def attention_einsum(q, k, v):
    s = jnp.einsum("sd,td->st", q, k) * (1.0 / np.sqrt(q.shape[-1]))
    return jax.nn.softmax(s, axis=-1) @ v


@pytest.mark.parametrize("f", [attention, attention_einsum])
def test_softmax_attention(f):
    rng = np.random.default_rng(2)
    args = (_rand(rng, 16, 8), _rand(rng, 16, 8), _rand(rng, 16, 8))
    part_args = args
    part = _whole(f, *args)
    assert len(part.regions) == 1
    (r,) = part.regions
    args = [args[part.program.invars.index(v)] for v in r.inputs]
    rg = _check_region(r, args, kinds=["max", "exp", "sum", "div", "matmul"])
    # k is folded in transposed.
    k_var = part.program.invars[1]
    assert any(r.inputs[gi.index] is k_var and gi.perm == (1, 0) for gi in rg.inputs)
    want = np.asarray(jax.jit(f)(*(part_args)))
    got = rg.finish_outputs(rg.graph.evaluate(rg.prepare_inputs(args)))[0]
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


def batched_attention(q, k, v):
    s = jnp.einsum("bsd,btd->bst", q, k)
    return jnp.einsum("bst,btd->bsd", jax.nn.softmax(s, axis=-1), v)


def test_batched_attention():
    rng = np.random.default_rng(3)
    args = (_rand(rng, 2, 8, 4), _rand(rng, 2, 8, 4), _rand(rng, 2, 8, 4))
    part = _whole(batched_attention, *args)
    assert len(part.regions) == 1
    _check_region(part.regions[0], args)


def split_by_unsupported(x, w1, w2):
    h = jnp.sum(x @ w1, axis=-1, keepdims=True) + x @ w1
    h = jnp.sin(h)  # not a kernel op
    return jnp.mean(h @ w2, axis=0)


def test_unsupported_op_splits_regions():
    rng = np.random.default_rng(4)
    args = (_rand(rng, 4, 8), _rand(rng, 8, 8), _rand(rng, 8, 6))
    part = _whole(split_by_unsupported, *args)
    assert len(part.regions) == 2
    assert any("sin" in reason for reason in part.unsupported.values())
    first, second = part.regions
    assert "sin" not in first.primitives + second.primitives
    assert first.inputs[:2] == part.program.invars[:2]
    assert len(first.outputs) == 1 and len(second.outputs) == 1
    assert second.outputs == part.program.outvars
    # The first region's output feeds sin, whose output is the second region's input.
    sin_node = next(n for n in part.program.nodes if n.name == "sin")
    assert sin_node.invars == first.outputs
    assert sin_node.outvars[0] in second.inputs
    h = first.evaluate(*[args[part.program.invars.index(v)] for v in first.inputs])
    _check_region(first, [args[part.program.invars.index(v)] for v in first.inputs])
    vals2 = [
        jnp.sin(h[0]) if v is sin_node.outvars[0] else args[part.program.invars.index(v)]
        for v in second.inputs
    ]
    _check_region(second, vals2, kinds=["mean"])


def test_convexity_through_unsupported_op():
    # a = x@w feeds both sin and the add; merging would create a cycle through sin.
    def f(x, w):
        a = x @ w
        return jnp.sum(a + jnp.sin(a), axis=-1)

    rng = np.random.default_rng(5)
    args = (_rand(rng, 4, 8), _rand(rng, 8, 8))
    part = _whole(f, *args)
    for r in part.regions:
        produced = {v for n in r.nodes for v in n.outvars}
        sin = next(n for n in part.program.nodes if n.name == "sin")
        assert not (sin.invars[0] in produced and sin.outvars[0] in r.inputs)
    # The matmul alone, then add + reduce_sum after sin.
    assert [r.primitives for r in part.regions] == [["dot_general"], ["add", "reduce_sum"]]
    _check_region(part.regions[0], args)
    a = np.asarray(part.regions[0].evaluate(*args)[0])
    _check_region(part.regions[1], [a, np.sin(a)])


def test_no_region_without_matmul_or_reduction():
    part = partition(jax.make_jaxpr(lambda x: jnp.exp(x) * 2.0 + 1.0)(jnp.ones((4, 4))))
    assert part.regions == []


def _region_values(part, args):
    """Each region's input values, from the flattened program run by jax."""
    env = dict(part.program.consts)
    env.update(zip(part.program.invars, args))
    run_nodes(part.program.nodes, env)
    return [[env[v] for v in r.inputs] for r in part.regions]


def test_transposes_of_computed_values_fold_into_the_matmul():
    # A transpose of an intermediate moves no data: the matmul takes it by swapping its
    # operands (Aᵀ·W = (Wᵀ·A)ᵀ), its result laid out transposed.
    def f(x, w):
        return (jnp.exp(x @ w).T @ w).sum()

    rng = np.random.default_rng(6)
    args = (0.3 * _rand(rng, 8, 8), _rand(rng, 8, 8))
    part = _whole(f, *args)
    assert [r.primitives for r in part.regions] == [
        ["dot_general", "exp", "transpose", "dot_general", "reduce_sum"]
    ]
    _check_region(part.regions[0], args)

    # dot_general contracting the lhs's first dim
    def g(x, w):
        return jax.lax.dot_general(jnp.exp(x), w, (((0,), (0,)), ((), ()))).sum(axis=-1)

    part = _whole(g, *args)
    assert len(part.regions) == 1 and not part.unsupported
    _check_region(part.regions[0], args)

    # a max over a broadcast dim is the value itself
    def h(x):
        y = jnp.broadcast_to(x[:, None, :], (4, 3, 8))
        return jnp.max(y, axis=1) * 2.0

    part = _whole(h, args[0][:4])
    assert len(part.regions) == 1
    _check_region(part.regions[0], [args[0][:4]])


def test_layout_conflict_cuts_the_region():
    # A reshape merging dims that a computed value holds on different kernel axes (after a
    # transpose) would move data: the region is cut there, the value handed over by XLA.
    def k(x, w, w2):
        return (jnp.exp(x @ w).T.reshape(4, 16) @ w2).sum()

    rng = np.random.default_rng(7)
    args = (0.3 * _rand(rng, 8, 8), _rand(rng, 8, 8), _rand(rng, 16, 3))
    part = _whole(k, *args)
    assert [r.primitives for r in part.regions] == [
        ["dot_general", "exp", "transpose"],
        ["reshape", "dot_general", "reduce_sum"],
    ]
    assert part.regions[0].outputs == part.regions[1].inputs[:1]
    for region, values in zip(part.regions, _region_values(part, args)):
        _check_region(region, values)


def test_unsupported_max_and_pow():
    def f(x, w):
        return jnp.maximum(x @ w, 0.5).sum() + (x**5).sum()

    part = partition(jax.make_jaxpr(f)(jnp.ones((4, 4)), jnp.ones((4, 4))))
    reasons = " ".join(part.unsupported.values())
    assert "max:" in reasons and "integer_pow: y=5" in reasons


def test_custom_derivative_calls_are_recorded_whole_or_kept_opaque():
    """A custom_jvp/custom_vjp body is inlined for partitioning and recorded (so it can be
    run as the original call, keeping its derivative rule); an identity with a custom
    gradient, whose output its body does not compute, stays one opaque node; a call with an
    unsupported op in its body keeps all of its body out of the regions."""

    @jax.custom_vjp
    def identity(x):
        return x

    identity.defvjp(lambda x: (x, None), lambda _, ct: (ct * 0.5,))

    @jax.custom_vjp
    def sin_matmul(x, w):
        return jnp.sin(x) @ w

    sin_matmul.defvjp(
        lambda x, w: (sin_matmul(x, w), (x, w)), lambda res, ct: (ct @ res[1].T, res[0].T @ ct)
    )

    @jax.custom_jvp
    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    # a deliberately unusual rule (half the true tangent), so that losing it shows
    softmax.defjvp(
        lambda p, t: (softmax(*p), 0.5 * jax.jvp(lambda x: jax.nn.softmax(x, axis=-1), p, t)[1])
    )

    def f(x, w):
        return sin_matmul(softmax(identity(x) @ w), w.T)

    rng = np.random.default_rng(0)
    x, w = _rand(rng, 8, 16), _rand(rng, 16, 16)
    part = _whole(f, x, w)
    opaque = [n for n in part.program.nodes if n.opaque]
    assert [n.name for n in opaque] == ["custom_vjp_call"]  # the identity
    names = sorted(c.name for c in part.program.custom_calls)
    assert names == ["custom_jvp_call", "custom_vjp_call"]  # softmax, sin_matmul
    sin_call = next(c for c in part.program.custom_calls if c.name == "custom_vjp_call")
    assert all(
        "inside a custom_vjp_call" in part.unsupported[n.index]
        for n in sin_call.nodes
        if n.name != "sin"
    )
    (region,) = part.regions  # the matmul and the softmax, the whole softmax call inside
    assert "dot_general" in region.primitives and "exp" in region.primitives
    assert [c.name for c in region.calls] == ["custom_jvp_call"] and not region.blocked
    # Differentiating the region's evaluation goes through the recorded call.
    want = jax.grad(lambda x: jnp.sum(softmax(x @ w) ** 2))(x)
    got = jax.grad(lambda x: jnp.sum(region.evaluate(x, w)[0] ** 2))(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_tanh_and_gelu():
    """tanh becomes 2·sigmoid(2z) - 1 (a kernel graph has no tanh); jax.nn.gelu's tanh
    form is recognized as the kernel graph's gelu, the exact form (0.5·x·erfc(-x/√2)) as its
    gelu_erf; the formula with lax.erf converts with the kernel graph's erf."""
    rng = np.random.default_rng(3)
    args = (_rand(rng, 8, 32), _rand(rng, 32, 16))

    def tanh_mlp(x, w):
        return jnp.tanh(x @ w) * 0.5

    (r,) = _whole(tanh_mlp, *args).regions
    _check_region(r, args, kinds=["sigmoid", "matmul"])

    def gelu_mlp(x, w):
        return jax.nn.gelu(x @ w, approximate=True)

    (r,) = _whole(gelu_mlp, *args).regions
    rg = _check_region(r, args, kinds=["gelu", "matmul"])
    assert "sigmoid" not in str(rg.graph) and "tanh" not in str(rg.graph)

    def erf_gelu(x, w):
        return jax.nn.gelu(x @ w, approximate=False)

    (r,) = _whole(erf_gelu, *args).regions
    rg = _check_region(r, args, kinds=["gelu_erf", "matmul"])
    assert "erfc" not in str(rg.graph) and "mul_scalar" not in str(rg.graph)

    def erf_gelu_written_out(x, w):  # the same formula, its operands the other way round
        h = x @ w
        return jax.lax.erfc(h * np.float32(-np.sqrt(0.5))) * (h * 0.5)

    (r,) = _whole(erf_gelu_written_out, *args).regions
    _check_region(r, args, kinds=["gelu_erf", "matmul"])

    def erf_gelu_of_another(x, w):  # 0.5·x times erfc of another value: not a GELU
        h = x @ w
        return (h * 0.5) * jax.lax.erfc(-(h + 1.0) * np.float32(np.sqrt(0.5)))

    (r,) = _whole(erf_gelu_of_another, *args).regions
    rg = _check_region(r, args, kinds=["erfc", "matmul"])
    assert "gelu_erf" not in str(rg.graph)

    def erf_formula_gelu(x, w):
        h = x @ w
        return 0.5 * h * (1.0 + jax.lax.erf(h / np.sqrt(2.0).astype(np.float32)))

    (r,) = _whole(erf_formula_gelu, *args).regions
    _check_region(r, args, kinds=["erf(", "matmul"])


def test_gelu_in_bfloat16_is_one_gelu():
    """jax.nn.gelu rounds its constants to its input's dtype (√(2/π) becomes 0.796875 in
    bfloat16): still the kernel graph's one gelu, computed with the exact constants, within
    bfloat16's tolerance of what jax computes (2^-5 normwise, the model zoo's)."""
    rng = np.random.default_rng(4)
    args = tuple(jnp.asarray(_rand(rng, *s), jnp.bfloat16) for s in ((8, 32), (32, 16)))

    def gelu_mlp(x, w):
        return jax.nn.gelu(x @ w, approximate=True)

    (r,) = _whole(gelu_mlp, *args).regions
    rg = region_to_graph(r)
    ops = str(rg.graph)
    assert "gelu" in ops and "sigmoid" not in ops, ops
    want = np.asarray(jax.jit(gelu_mlp)(*args), np.float64)
    (got,) = rg.finish_outputs(rg.graph.evaluate(rg.prepare_inputs(args)))
    error = np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want)
    assert error <= 2**-5, error


def test_scalar_inputs_meet_tensors():
    # jaxpr lets a rank-0 value meet a tensor in an elementwise op (a traced scale); so does
    # a full reduction's result
    def f(x, s, t):
        h = x @ x
        return h * s + t * h.sum()

    rng = np.random.default_rng(8)
    args = (_rand(rng, 4, 4), np.float32(2.0), np.float32(-3.0))
    part = _whole(f, *args)
    assert [r.primitives for r in part.regions] == [
        ["dot_general", "mul", "reduce_sum", "mul", "add"]
    ]
    _check_region(part.regions[0], args)


def test_a_transposed_input_is_laid_out_by_xla_and_counted():
    # exp(xᵀ) meets a computed value laid out [16, 8]: XLA transposes x once at the boundary,
    # and the copy is counted (what explain reports)
    def f(x, y, w):
        return (jnp.exp(x.T) * (y @ w)).sum(-1)

    rng = np.random.default_rng(9)
    args = (_rand(rng, 8, 16), _rand(rng, 16, 4), _rand(rng, 4, 8))
    part = _whole(f, *args)
    (region,) = part.regions
    rg = _check_region(region, args)
    assert rg.copies == 8 * 16
    assert rg.layout_ops() == [f"input 0 ({region.inputs[0]}) laid out as [16, 8]: 128 elements"]

    # a plain reshape of an input is no copy: x [2, 8, 16] folds into rows [16, 16]
    def g(x, w):
        return jax.nn.softmax(x @ w, axis=-1)

    args = (_rand(rng, 2, 8, 16), _rand(rng, 16, 4))
    (region,) = _whole(g, *args).regions
    rg = _check_region(region, args)
    assert rg.copies == 0 and rg.layout_ops() == []
    assert "input#0  [16, 16]" in str(rg.graph)


def test_a_tied_embedding_is_read_as_stored():
    # x @ embedding.T (GPT-2's logits, a weight held [out, in]): the small side is laid
    # out instead, the activation computed as [d, rows] ("fold-swapped") and the result
    # laid back, so the [vocab, d] embedding is read as it is held, with no copy of it
    def logits(x, mul, scale, bias, emb):
        return (x * (mul * scale) + bias) @ emb.T

    rng = np.random.default_rng(10)
    rows, d, vocab = 4, 16, 64
    args = (
        _rand(rng, rows, 1, d),
        _rand(rng, rows, 1, 1),
        _rand(rng, d),
        _rand(rng, d),
        _rand(rng, vocab, d),
    )
    part = _whole(logits, *args)
    (region,) = part.regions
    values = [args[part.program.invars.index(v)] for v in region.inputs]
    rg = _check_region(region, values, kinds=["matmul"])
    assert rg.policy == "fold-swapped"
    emb = part.program.invars[4]
    assert not [op for op in rg.layout_ops() if f"({emb})" in op], rg.layout_ops()
    assert rg.copies == rows * d + rows * vocab  # the activation in, the logits out
    assert f"[{vocab}, {d}]" in str(rg.graph)


def _residual_and_its_float32_copy(x, w, r):
    # A bfloat16 decoder layer's tail: the residual stream stays bfloat16, and what comes
    # next (sin: not a kernel primitive, as RoPE's cos) reads it as float32; both leave the
    # region.
    y = r + jnp.dot(x, w)
    return y, jnp.sin(y.astype(jnp.float32))


def test_one_value_leaving_a_region_twice_is_one_graph_output(rng):
    x = jnp.asarray(_rand(rng, 8, 64), jnp.bfloat16)
    w = jnp.asarray(_rand(rng, 64, 32), jnp.bfloat16)
    r = jnp.asarray(_rand(rng, 8, 32), jnp.bfloat16)
    part = partition(jax.make_jaxpr(_residual_and_its_float32_copy)(x, w, r))
    (region,) = [r for r in part.regions if "dot_general" in r.primitives]
    assert len(region.outputs) == 2, region.outputs  # the residual and its convert
    rg = region_to_graph(region)
    # Marked twice, one kernel op cannot write it: the search of the region found nothing.
    assert len(rg.graph.outputs) == 1
    values = [np.asarray(v) for v in (x, w, r)]
    want = [np.asarray(v) for v in region.evaluate(*values)]
    got = rg.finish_outputs(rg.graph.evaluate(rg.prepare_inputs(values), dtype="float32"))
    assert [g.dtype for g in got] == [w.dtype for w in want]
    # The region rounds the product and the sum to bfloat16 (unit roundoff 2^-8 each), the
    # float32 evaluation does not: normwise within two roundings.
    for g, w_ in zip(got, want, strict=True):
        g, w_ = g.astype(np.float32), w_.astype(np.float32)
        assert np.max(np.abs(g - w_)) <= 2**-7 * np.max(np.abs(w_))

"""@mirage_jax.optimize under jax's transformations and options: grad
through kernel regions (backward by XLA), vmap (the batched region optimized again),
jit over a first call, min_region_flops, backend selection and its fallback, explain(), and
jax.jit's errors for bad arguments. Every result is compared with plain jax."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import inputs, kernels_always_win, normwise, rmsnorm_linear  # noqa: F401

import mirage_jax as mj
from mirage_jax.rewrite import region as _optimize_region

REL = 1e-5  # float32, normwise: a kernel and XLA differ by accumulation order only


COTANGENT = jnp.asarray(np.random.default_rng(7).standard_normal((8, 64)), jnp.float32)


def loss(fn):
    """Linear in fn's output with a fixed random cotangent, so the gradients compare the
    backward passes alone at float32 accuracy (a nonlinear loss would also carry the
    kernel's forward rounding, amplified by its derivative); test_grad_of_vmap below
    checks one that depends on the forward values."""
    return lambda x, g, w: jnp.sum(COTANGENT * fn(x, g, w))


def mirage_warnings(record):
    return [str(w.message) for w in record if "mirage_jax.optimize" in str(w.message)]


def test_grad_through_a_kernel_region_matches_jax_grad(kernels_always_win):
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    got = jax.grad(loss(f), argnums=(0, 1, 2))(x, g, w)
    want = jax.grad(loss(rmsnorm_linear), argnums=(0, 1, 2))(x, g, w)
    for a, b in zip(got, want):
        assert a.shape == b.shape and normwise(a, b) < REL
    assert f.regions(x, g, w)[0].chosen == "kernel" and f.uses_kernels(x, g, w)
    # The forward pass of value_and_grad still runs the generated kernel.
    value_and_grad = jax.jit(jax.value_and_grad(loss(f), argnums=2))
    assert "mj_cpu_" in value_and_grad.lower(x, g, w).as_text()
    value, grad = value_and_grad(x, g, w)
    assert normwise(value, loss(rmsnorm_linear)(x, g, w)) < REL
    assert normwise(grad, want[2]) < REL


def test_vmap_optimizes_the_batched_region_again(kernels_always_win):
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    xs = jnp.stack([x, 2 * x - 1, -x])
    got = jax.vmap(f, in_axes=(0, None, None))(xs, g, w)
    want = jax.vmap(rmsnorm_linear, in_axes=(0, None, None))(xs, g, w)
    assert normwise(got, want) < REL
    hlo = jax.jit(jax.vmap(f, in_axes=(0, None, None))).lower(xs, g, w).as_text()
    assert "mj_cpu_" in hlo
    explained = f.explain(x, g, w)
    assert "under vmap (axis size 3, batched inputs [0])" in explained
    # the batched region is a kernel of its own, at the batched shapes (the vmapped dim
    # folded into the rows)
    assert "input#0  [24, 256]" in explained
    # vmap over the weights instead; then vmap of grad and grad of vmap
    ws = jnp.stack([w, w * 0.5])
    assert (
        normwise(
            jax.vmap(f, in_axes=(None, None, 0))(x, g, ws),
            jax.vmap(rmsnorm_linear, in_axes=(None, None, 0))(x, g, ws),
        )
        < REL
    )
    vg = jax.vmap(jax.grad(loss(f)), in_axes=(0, None, None))(xs, g, w)
    vg_want = jax.vmap(jax.grad(loss(rmsnorm_linear)), in_axes=(0, None, None))(xs, g, w)
    assert normwise(vg, vg_want) < REL
    # test_grad_of_vmap: a loss that depends on the forward values (2·y·dy)
    gv = jax.grad(lambda xs: jnp.sum(jax.vmap(f, in_axes=(0, None, None))(xs, g, w) ** 2))(xs)
    gv_want = jax.grad(
        lambda xs: jnp.sum(jax.vmap(rmsnorm_linear, in_axes=(0, None, None))(xs, g, w) ** 2)
    )(xs)
    assert normwise(gv, gv_want) < REL


def test_a_first_call_under_jit_specializes_inside_the_trace(kernels_always_win):
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = jax.jit(f)(x, g, w)  # superoptimize's own timing must not be staged into jit
    assert not mirage_warnings(record)
    assert normwise(got, jax.jit(rmsnorm_linear)(x, g, w)) < REL
    assert [r.chosen for r in f.regions(x, g, w)] == ["kernel"]


def test_regions_below_min_region_flops_run_as_jax_without_a_search(monkeypatch):
    def no_search(*args, **kwargs):
        raise AssertionError("superoptimize must not run for a region below the threshold")

    monkeypatch.setattr(_optimize_region, "superoptimize", no_search)
    f = mj.optimize(rmsnorm_linear, min_region_flops=10**9)
    x, g, w = inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reported, not warned: the user asked for it
        got = f(x, g, w)
    assert normwise(got, jax.jit(rmsnorm_linear)(x, g, w)) < 1e-6
    (report,) = f.regions(x, g, w)
    assert report.chosen == "xla" and "< min_region_flops 1e+09" in report.reason
    # 2·8·256·64 for the matmul plus the norm's elementwise work
    assert report.flops > 2 * 8 * 256 * 64
    with pytest.raises(ValueError, match="min_region_flops"):
        mj.optimize(rmsnorm_linear, min_region_flops=-1)


def test_auto_picks_cuda_on_a_gpu_and_an_unavailable_backend_falls_back_per_region(monkeypatch):
    seen = []

    def cuda_not_ready(kg, config, backend, **kwargs):
        seen.append(backend)
        raise NotImplementedError(
            "superoptimize: backend 'cuda' is planned but not implemented yet"
        )

    monkeypatch.setattr(_optimize_region, "superoptimize", cuda_not_ready)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    f = mj.optimize(rmsnorm_linear)  # backend="auto"
    x, g, w = inputs()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = f(x, g, w)
    assert seen == ["cuda"]
    (message,) = mirage_warnings(record)
    assert "superoptimize failed: NotImplementedError" in message and "region at" in message
    assert normwise(got, jax.jit(rmsnorm_linear)(x, g, w)) < 1e-6
    assert "custom_call" not in jax.jit(f).lower(x, g, w).as_text()


def test_explain_prints_sources_graph_verification_and_speedup(kernels_always_win, capsys):
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    text = f.explain(x, g, w)
    assert capsys.readouterr().out.strip() == text.strip()
    assert "1 region(s), 1 run as generated kernels" in text
    assert (
        "optimize_test_support.py:" in text
        and "ms = jnp.mean(x * x, axis=-1, keepdims=True)" in text
    )
    assert "chosen graph:" in text and "customized(" in text
    assert "verification: equivalent to the original by finite-field fingerprints" in text
    assert "float check at full size" in text and "speedup over XLA: 2.00x" in text


def test_bad_arguments_get_the_errors_jax_jit_gives(kernels_always_win):
    x, g, w = inputs()

    def add(a, b):
        return jax.lax.add(a, b) @ w

    cases = [
        (rmsnorm_linear, (x, g, w[:10])),  # wrong shape for the signature
        (add, (x, x.astype(jnp.bfloat16))),  # wrong dtype
    ]
    for fn, args in cases:
        with pytest.raises(Exception) as want:
            jax.jit(fn)(*args)
        with pytest.raises(type(want.value)) as got:
            mj.optimize(fn)(*args)
        assert str(got.value).splitlines()[0] == str(want.value).splitlines()[0]
    # a non-array argument: jax.jit's TypeError, naming the function, the argument's path
    # and type, and static_argnums
    with pytest.raises(TypeError) as want:
        jax.jit(rmsnorm_linear)("x", g, w)
    with pytest.raises(TypeError) as got:
        mj.optimize(rmsnorm_linear)("x", g, w)

    def unaddressed(e):
        return re.sub(r" at 0x[0-9a-f]+", "", str(e.value))

    assert unaddressed(got) == unaddressed(want)
    assert "rmsnorm_linear" in unaddressed(got) and "at path x" in unaddressed(got)
    # non-hashable static arguments: ValueError, as with jax.jit
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        jax.jit(rmsnorm_linear, static_argnums=2)(x, g, np.ones(3))
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        mj.optimize(rmsnorm_linear, static_argnums=2)(x, g, np.ones(3))


def test_static_arguments_and_python_scalars_behave_as_under_jit():
    def scaled(x, g, w, scale, mode):
        y = rmsnorm_linear(x, g, w) * scale
        return -y if mode == "neg" else y

    # This is about specializations, not kernels: backend "xla" skips the searches.
    f = mj.optimize(scaled, static_argnames=("mode",), backend="xla")
    x, g, w = inputs()
    for scale in (2.0, 3.0):  # a traced Python float: one specialization for both
        for mode in ("neg", "pos"):
            want = jax.jit(scaled, static_argnames=("mode",))(x, g, w, scale, mode=mode)
            assert normwise(f(x, g, w, scale, mode=mode), want) < REL
    assert len(f._specializations) == 2  # one per static mode
    # a static name passed positionally is static too (jax.jit reads the signature)
    want = jax.jit(scaled, static_argnames=("mode",))(x, g, w, 2.0, "neg")
    assert normwise(f(x, g, w, 2.0, "neg"), want) < REL


@jax.custom_vjp
def halve_gradient(x):
    return x


halve_gradient.defvjp(lambda x: (x, None), lambda _, ct: (ct * 0.5,))


@jax.custom_vjp
def straight_through_norm_linear(x, g, w):
    return rmsnorm_linear(x, g, w)


def _straight_through_bwd(res, ct):
    x, g, w = res  # a deliberately different gradient: as if the norm were the identity
    return ct @ w.T, jnp.zeros_like(g), x.T @ ct


straight_through_norm_linear.defvjp(
    lambda x, g, w: (rmsnorm_linear(x, g, w), (x, g, w)), _straight_through_bwd
)


def test_custom_derivative_rules_inside_the_function_are_kept(kernels_always_win):
    """jax inlines nothing of a custom_vjp for grad: neither may optimize. An identity with
    a custom gradient outside any region, and a custom_vjp around a whole kernel region."""
    x, g, w = inputs()

    def outer(x, g, w):
        return rmsnorm_linear(halve_gradient(x), g, w)

    for fn in (outer, straight_through_norm_linear):
        f = mj.optimize(fn)
        got = jax.grad(loss(f), argnums=(0, 1, 2))(x, g, w)
        want = jax.grad(loss(fn), argnums=(0, 1, 2))(x, g, w)
        for a, b in zip(got, want):
            if np.any(np.asarray(b)):
                assert normwise(a, b) < REL
            else:  # the straight-through rule's zero gradient for g
                assert not np.any(np.asarray(a))
        assert normwise(f(x, g, w), fn(x, g, w)) < REL
        assert [r.chosen for r in f.regions(x, g, w)] == ["kernel"]


def test_a_rewritten_program_slower_than_jit_as_a_whole_runs_as_jit(monkeypatch):
    """Each region's kernel beats XLA on the region, but the whole rewritten program is
    timed against jax.jit of the function too, and loses here: the function runs as jit."""
    from mirage_jax.runtime import profile as _profile

    def times(functions, args, **_):  # kernels win their regions; the rewritten program loses
        return {n: {"xla": 1.0, "rewritten": 2.0}.get(n, 0.5) for n in functions}, 1

    monkeypatch.setattr(_profile, "median_times", times)
    f = mj.optimize(rmsnorm_linear)
    x, g, w = inputs()
    assert normwise(f(x, g, w), jax.jit(rmsnorm_linear)(x, g, w)) < 1e-6
    assert [r.chosen for r in f.regions(x, g, w)] == ["kernel"] and not f.uses_kernels(x, g, w)
    assert "custom_call" not in jax.jit(f).lower(x, g, w).as_text()
    text = f.explain(x, g, w)
    assert "the function runs as jax.jit" in text
    assert "2000.000 ms rewritten vs 1000.000 ms with jax.jit" in text

"""A function is specialized while jax.jit traces it; its timings must not run under that
trace (mirage_jax/rewrite/untraced.py): jitted calls made there leave jax's C++ dispatch and
each carries a constant that shrinks every kernel's ratio over XLA."""

import jax
import jax.numpy as jnp
from jax._src import core
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import inputs, normwise, rmsnorm_linear

import mirage_jax as mj
from mirage_jax.rewrite import region as _optimize_region
from mirage_jax.rewrite import untraced
from mirage_jax.runtime import profile as _profile


def test_every_timing_of_the_optimization_runs_outside_the_trace(monkeypatch, tmp_path):
    real = _profile.median_times
    clean: list[bool] = []

    def recording(functions, args, **kwargs):
        clean.append(core.trace_state_clean())
        return real(functions, args, **kwargs)

    monkeypatch.setattr(_profile, "median_times", recording)
    _optimize_region.forget()  # this session's memo would answer without timing
    f = mj.optimize(rmsnorm_linear, cache_dir=tmp_path)
    x, g, w = inputs()
    assert normwise(f(x, g, w), jax.jit(rmsnorm_linear)(x, g, w)) < 1e-5
    assert clean, "nothing was timed"
    assert all(clean), f"{clean.count(False)} of {len(clean)} timings ran under the trace"


def test_a_call_returns_its_value_and_raises_its_error_here():
    def traced_state(x):
        return core.trace_state_clean(), x + 1

    def inside(x):
        return untraced.call(traced_state, x)

    seen = []
    jax.jit(lambda x: seen.append(inside(1)) or x)(jnp.ones(()))
    assert seen == [(True, 2)]

    def fails():
        raise ValueError("named problem")

    try:
        untraced.call(fails)
    except ValueError as e:
        assert "named problem" in str(e)
    else:
        raise AssertionError("the worker's error was lost")


def test_the_callers_jax_settings_hold_on_the_worker():
    """A user's `with jax.enable_x64()` or `jax.default_matmul_precision(...)` around the
    first call must hold while the function is specialized: the worker is another thread,
    and jax keeps these settings per thread."""

    def settings():
        return jax.config.jax_enable_x64, jax.config.jax_default_matmul_precision

    outside = untraced.call(settings)
    with jax.enable_x64(True), jax.default_matmul_precision("highest"):
        seen = []
        jax.jit(lambda x: seen.append(untraced.call(settings)) or x)(jnp.ones(()))
        assert seen == [(True, "highest")]
    assert untraced.call(settings) == outside  # nothing leaks to later calls

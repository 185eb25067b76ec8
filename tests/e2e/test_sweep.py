"""mirage_jax.optimize runs whatever jax.jit runs: hundreds of functions of jax.numpy, jax.nn,
jax.lax and jax.random (tests/e2e/sweep_cases.py), each wrapped by optimize and called, give
jax.jit's result, or raise jax.jit's exception with jax.jit's message.

Results are compared bitwise (integers, booleans, PRNG keys; floats too where no kernel
runs, since the function then runs as jax.jit compiles it) and within a float tolerance where
a generated kernel computes part of it. Kernels are kept whatever the timing says
($MIRAGE_JAX_KEEP_KERNELS=1), so the regions that convert run as kernels. Every region is
searched with a small config, all of them sharing one cache.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sweep_cases import GROUPS, Case, cases

import mirage_jax as mj

CONFIG = mj.SearchConfig(
    max_kernel_ops=1, max_block_ops=3, time_budget_s=1, max_verified=1, threads=1
)
# A kernel's float32 reductions may add in another order than XLA's.
RTOL = 2e-5


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("sweep_cache")


def _outcome(fn: Any, args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "result", jax.block_until_ready(fn(*args))
    except Exception as e:
        return "error", (type(e), str(e))


def _leaf_problem(got: Any, want: Any, tolerant: bool) -> str:
    if jnp.issubdtype(want.dtype, jax.dtypes.prng_key):
        if got.dtype != want.dtype:
            return f"key dtype {got.dtype} != {want.dtype}"
        got, want = jax.random.key_data(got), jax.random.key_data(want)
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)} != jax.jit's {want.dtype}{list(want.shape)}"
    inexact = jnp.issubdtype(want.dtype, jnp.inexact)
    if np.array_equal(got, want, equal_nan=inexact):
        return ""
    if not (inexact and tolerant):
        return f"differs from jax.jit's result: {got!r} != {want!r}"
    g, w = got.astype(np.complex128), want.astype(np.complex128)
    if not np.array_equal(np.isnan(g), np.isnan(w)) or not np.array_equal(
        np.where(np.isinf(g), g, 0), np.where(np.isinf(w), w, 0)
    ):
        return f"NaN/Inf where jax.jit's differ: {got!r} != {want!r}"
    finite = np.isfinite(w)
    scale = max(float(np.max(np.abs(w[finite]), initial=0.0)), 1.0)
    err = float(np.max(np.abs(g[finite] - w[finite]), initial=0.0))
    if err > RTOL * scale:
        return f"off by {err:.3g} (scale {scale:.3g}) with a kernel: {got!r} != {want!r}"
    return ""


def _problem(case: Case, cache_dir: Any) -> str:
    """ "" when optimize(case.fn) behaves as jax.jit(case.fn), otherwise what differs."""
    want = _outcome(jax.jit(case.fn), case.args)
    if (want[0] == "error") != case.error:
        expected = "an error" if case.error else "a result"
        return f"jax.jit gave {want[0]} {want[1]!r}, the case expects {expected}"
    opt = mj.optimize(case.fn, config=CONFIG, cache_dir=cache_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _outcome(opt, case.args)
    ours = [w for w in caught if "mirage_jax" in str(w.message)]
    if got[0] != want[0]:
        return f"optimize gave {got[0]} {got[1]!r} where jax.jit gave {want[0]} {want[1]!r}"
    if want[0] == "error":
        if got[1] != want[1]:
            return f"optimize raised {got[1]!r}, jax.jit {want[1]!r}"
        return ""
    regions = opt.regions(*case.args)
    if len(ours) > max(1, len(regions)):
        return f"{len(ours)} warnings for {len(regions)} regions: {[str(w.message) for w in ours]}"
    got_leaves, got_tree = jax.tree_util.tree_flatten(got[1])
    want_leaves, want_tree = jax.tree_util.tree_flatten(want[1])
    if got_tree != want_tree:
        return f"result structure {got_tree} != jax.jit's {want_tree}"
    tolerant = opt.uses_kernels(*case.args)
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        problem = _leaf_problem(g, w, tolerant)
        if problem:
            return f"output {i}: {problem}"
    return ""


# MIRAGE_JAX_SWEEP=full: every public name (slower), not the default selection.
FULL = os.environ.get("MIRAGE_JAX_SWEEP") == "full"


@pytest.mark.parametrize("group", GROUPS)
def test_optimize_runs_as_jax_jit(group, cache_dir, monkeypatch):
    monkeypatch.setenv("MIRAGE_JAX_KEEP_KERNELS", "1")
    found = cases(group, FULL)
    problems = {}
    for case in found:
        problem = _problem(case, cache_dir)
        if problem:
            problems[case.name] = problem
    report = "\n".join(f"{name}: {problem}" for name, problem in problems.items())
    assert not problems, f"{len(problems)} of {len(found)} cases differ from jax.jit:\n{report}"


def test_the_sweep_is_large():
    """At least 200 functions called, across the four modules, some of them errors."""
    found = [c for g in GROUPS for c in cases(g, FULL)]
    assert len(found) >= 200
    assert sum(c.error for c in found) >= 10
    for group in GROUPS[:4]:
        assert len([c for c in cases(group, FULL) if not c.error]) >= 5, group

"""Helpers shared by the code generation and runtime tests: one kernel cache per pytest
session (kernels compiled by one test are reused by the others), random inputs, and the
tolerance a stored dtype allows."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest


@pytest.fixture(autouse=True)
def session_kernel_cache(monkeypatch, tmp_path_factory):
    """Points MIRAGE_JAX_CACHE at a directory shared by every test of this pytest run."""
    path = tmp_path_factory.getbasetemp() / "kernel_cache"
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(path))
    return path


def random_inputs(graph, seed: int = 0) -> list:
    """One array per graph input, of its shape and dtype, drawn from a standard normal."""
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal(t.shape), dtype=t.dtype) for t in graph.inputs]


def assert_close(got, want, rtol: float, what: str, floor: float = 1e-3) -> None:
    """|got - want| <= rtol * (|want| + floor·max|want|): relative, with a floor for elements
    that cancel to near zero (their error scales with the operands, not with the result).
    floor=1 makes it normwise, for references that round after every op."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = floor * float(np.max(np.abs(want))) if want.size else 0.0
    excess = np.abs(got - want) - rtol * (np.abs(want) + scale)
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert excess[worst] <= 0, (
        f"{what}: element {worst} is {got[worst]}, expected {want[worst]} (rtol {rtol})"
    )


def storage_rtol(dtype: str) -> float:
    """Float32 kernels round once, when they store: half an ulp of the stored dtype, plus
    float32 accumulation error (bounded by 1e-5 for these small shapes)."""
    return float(jnp.finfo(dtype).eps) / 2 + 1e-5

"""Generated CUDA kernels run on the GPU: every paper μGraph (small, fragment-sized and paper
shapes) and every fused search result, in float32 and bfloat16, against the interpreter
(float64) and against XLA's own GPU code for the reference program; superoptimize with
backend="cuda". Skipped where jax sees no GPU; tests/gpu/run.sh runs them on a GPU machine.

XLA runs float32 dots in TF32 on Ampere and later by default; the reference runs at
jax.default_matmul_precision("highest") so it is a float32 reference. float32 kernels are
checked both ways: compiled at jax's default precision (TF32 tensor cores, TF32's
tolerance) and at "highest" (CUDA-core FMA, float32's).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import (
    FRAGMENT_SIZED,
    assert_close,
    kernel_rtol,
    random_inputs,
    storage_rtol,
)
from search_test_support import SEARCHES, fused_candidates

import mirage_jax as mj
from mirage_jax.ir.paper_graphs import PROGRAMS
from mirage_jax.runtime import backends, kernel_cache, toolchain
from mirage_jax.runtime import compile as _compile


def _gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


GPU = _gpu()
pytestmark = pytest.mark.skipif(
    GPU is None, reason="no GPU visible to jax (jax.devices('gpu') failed)"
)

# A bf16 reference lowered to XLA rounds after every op; the kernel rounds once (and its
# tensor-core operands once): a handful of roundings, normwise (test_codegen_cpu's bound).
BF16_VS_XLA_RTOL = 4 * float(jnp.finfo(jnp.bfloat16).eps)

SHAPES = {
    "small": lambda p: p.small,
    "fragment": lambda p: FRAGMENT_SIZED.get(p.name),
    "paper": lambda p: {},
}
CASES = [
    (name, size, dtype)
    for name in sorted(PROGRAMS)
    for size in SHAPES
    for dtype in ("float32", "bfloat16")
    if SHAPES[size](PROGRAMS[name]) is not None
]


@pytest.fixture(scope="module", autouse=True)
def cache_and_prebuild(tmp_path_factory):
    """One kernel cache for the module, filled in parallel up front (nvcc takes seconds a
    kernel; the tests then only load libraries)."""
    root = tmp_path_factory.mktemp("gpu_kernel_cache")
    previous = os.environ.get("MIRAGE_JAX_CACHE")
    os.environ["MIRAGE_JAX_CACHE"] = str(root)
    kernels = {}  # source -> (symbol, options), one per kernel, as mj.compile builds them
    for name, size, dtype in CASES:
        _, fused = PROGRAMS[name].build(**SHAPES[size](PROGRAMS[name]), dtype=dtype)
        for precision in [None] + (["highest"] if dtype == "float32" else []):
            with jax.default_matmul_precision(precision):
                options = backends.CUDA.options()
                kernels.update(
                    (source, (symbol, options))
                    for symbol, source in _compile._kernels(fused, backends.CUDA, options).values()
                )
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) - 1)) as pool:
        list(
            pool.map(
                lambda item: kernel_cache.library_for(
                    item[0], backends.CUDA, item[1][1], symbol=item[1][0]
                ),
                kernels.items(),
            )
        )
    yield
    if previous is None:
        del os.environ["MIRAGE_JAX_CACHE"]
    else:
        os.environ["MIRAGE_JAX_CACHE"] = previous


def on_gpu(arrays):
    return [jax.device_put(x, GPU) for x in arrays]


def check(reference, fused, dtype, what):
    inputs = random_inputs(fused, seed=5)
    want = fused.evaluate([np.asarray(x) for x in inputs])
    with jax.default_matmul_precision("highest"):
        xla = jax.jit(mj.compile(reference, backend="cuda"))(*on_gpu(inputs))
    precisions = [None] + (["highest"] if dtype == "float32" else [])
    for precision in precisions:
        with jax.default_matmul_precision(precision):
            tf32 = toolchain.tf32_allowed()
            kernels = jax.jit(mj.compile(fused, backend="cuda"))
        got = jax.block_until_ready(kernels(*on_gpu(inputs)))
        label = f"{what} ({'tf32' if tf32 else 'full precision'})"
        for i, (g, w, x, t) in enumerate(zip(got, want, xla, fused.outputs)):
            assert g.dtype == jnp.dtype(t.dtype), f"{label}: output {i} dtype"
            assert_close(
                g, w, kernel_rtol(t.dtype, tf32), f"{label}: output {i} vs interpreter", floor=1.0
            )
            if t.dtype == "float32":
                rtol = kernel_rtol(t.dtype, tf32) if tf32 else storage_rtol(t.dtype)
            else:
                rtol = BF16_VS_XLA_RTOL
            assert_close(g, x, rtol, f"{label}: output {i} vs XLA", floor=1.0)


@pytest.mark.parametrize("name, size, dtype", CASES)
def test_paper_kernel_on_the_gpu(name, size, dtype):
    reference, fused = PROGRAMS[name].build(**SHAPES[size](PROGRAMS[name]), dtype=dtype)
    check(reference, fused, dtype, f"{name} {size} {dtype}")


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_search_result_kernels_on_the_gpu(name):
    make_reference, config = SEARCHES[name]
    reference = make_reference()
    result = mj.search(reference, config=config, progress=False)
    fused = fused_candidates(result)
    assert fused, f"{name}: the search found no fused candidate ({result.reason!r})"
    for graph in fused:
        check(reference, graph, "float32", f"{name} candidate {graph.hash()}")


@pytest.mark.parametrize("precision", [None, "highest"])
def test_superoptimize_times_candidates_on_the_gpu(precision):
    """At jax's default precision XLA and the kernels may use TF32 (the float check allows
    it); at "highest" both compute float32."""
    reference = PROGRAMS["rmsnorm_linear"].build(batch=16, hidden=256, out_features=128)[0]
    config = mj.SearchConfig(max_kernel_ops=1, max_block_ops=5, threads=2)
    with jax.default_matmul_precision(precision):
        f = mj.superoptimize(reference, config, backend="cuda", top_k=2, progress=False)
        tf32 = toolchain.tf32_allowed()
    assert "xla" in f.timings and all(t > 0 for t in f.timings.values())
    inputs = random_inputs(reference, seed=9)
    got = f(*on_gpu(inputs))
    want = reference.evaluate([np.asarray(x) for x in inputs])
    rtol = kernel_rtol("float32", tf32) if tf32 else storage_rtol("float32")
    assert_close(got[0], want[0], rtol, "superoptimized vs interpreter", floor=1.0)
    print(f.report())

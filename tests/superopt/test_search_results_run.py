"""Every fused μGraph the search finds runs through the generated CPU kernel and computes
what the program computes: the search's output is compiled (mj.compile) and compared with
the interpreter and with XLA running the reference program."""

import jax
import numpy as np
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    assert_close,
    random_inputs,
    session_kernel_cache,
)
from search_test_support import RTOL, SEARCHES, fused_candidates

import mirage_jax as mj
from mirage_jax.ir import paper_graphs


@pytest.mark.parametrize("name", sorted(SEARCHES))
def test_search_results_run_as_generated_kernels(name):
    make_reference, config = SEARCHES[name]
    reference = make_reference()
    result = mj.search(reference, config=config, progress=False)
    print(f"{name}: {result.stats}")
    fused = fused_candidates(result)
    assert fused, f"{name}: the search found no fused candidate ({result.reason!r})"

    inputs = random_inputs(reference, seed=1)
    want = mj.compile(reference)(*inputs)  # no customized op: XLA runs all of it
    reference_by_xla = jax.jit(mj.compile(reference))(*inputs)
    for graph in fused:
        got = jax.jit(mj.compile(graph))(*inputs)
        interpreted = graph.evaluate([np.asarray(x) for x in inputs])
        for i, (g, w, x, r) in enumerate(zip(got, want, reference_by_xla, interpreted)):
            assert_close(
                g, r, RTOL, f"{name} candidate {graph.hash()} output {i} vs interpreter", floor=1.0
            )
            assert_close(
                g, x, RTOL, f"{name} candidate {graph.hash()} output {i} vs XLA", floor=1.0
            )
            assert_close(w, x, RTOL, f"{name} reference eager vs jit output {i}", floor=1.0)


# bf16 storage: the kernels compute in float32 and round once when they store, so against
# the float64 interpreter they are within half an ulp of bf16 plus float32 accumulation;
# XLA rounds after every op of the reference, a chain of a few bf16 roundings (normwise).
BF16_SEARCHES = {
    "rmsnorm_linear": (
        lambda: paper_graphs.rmsnorm_linear(8, 256, 64, col_tile=16, k_tile=32, dtype="bfloat16")[
            0
        ],
        mj.SearchConfig(max_kernel_ops=1, max_block_ops=5, threads=2, max_verified=4),
    ),
    "attention": (
        lambda: paper_graphs.flash_attention_online(
            2, 16, 64, 8, q_tiles=2, kv_tile=16, dtype="bfloat16"
        )[0],
        mj.SearchConfig(
            preset="attention",
            max_kernel_ops=1,
            max_block_ops=5,
            max_grids=2,
            max_verified=4,
            threads=2,
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(BF16_SEARCHES))
def test_bf16_search_results_run_as_generated_kernels(name):
    make_reference, config = BF16_SEARCHES[name]
    reference = make_reference()
    result = mj.search(reference, config=config, progress=False)
    fused = fused_candidates(result)
    assert fused, f"{name}: the search found no fused candidate ({result.reason!r})"
    eps = float(jax.numpy.finfo("bfloat16").eps)
    inputs = random_inputs(reference, seed=2)
    (reference_by_xla,) = jax.jit(mj.compile(reference))(*inputs)
    for graph in fused:
        (got,) = jax.jit(mj.compile(graph))(*inputs)
        assert got.dtype == jax.numpy.bfloat16
        (interpreted,) = graph.evaluate([np.asarray(x, np.float32) for x in inputs])
        assert_close(
            got,
            interpreted,
            eps / 2 + 1e-5,
            f"{name} bf16 {graph.hash()} vs interpreter",
            floor=1.0,
        )
        assert_close(
            got, reference_by_xla, 4 * eps, f"{name} bf16 {graph.hash()} vs XLA", floor=1.0
        )

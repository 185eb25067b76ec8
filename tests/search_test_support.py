"""Helpers shared by the search, search cache and code generation tests: small paper graphs,
a stand-in search that counts its calls, and the programs whose search results are compiled
and run."""

import threading
import time

import pytest

import mirage_jax as mj
from mirage_jax.ir import paper_graphs
from mirage_jax.ir.decode_graphs import (
    decode_gqa_pv,
    decode_gqa_softmax,
    decode_pv,
    decode_softmax,
)
from mirage_jax.ir.paper_graphs import rmsnorm_linear
from mirage_jax.runtime import toolchain
from mirage_jax.superopt import search as search_module

CONFIG = mj.SearchConfig(threads=2, max_kernel_ops=1, max_block_ops=5)


def graphs():
    return rmsnorm_linear(batch=4, hidden=16, out_features=8, col_tile=4, k_tile=4)


def fake_result(reason=""):
    ref, fused = graphs()
    stats = mj.SearchStats(
        states_explored=10,
        states_pruned=3,
        candidates_verified=2,
        candidates_accepted=1,
        seconds_saturate=0.5,
        seconds_enumerate=1.25,
        seconds_verify=0.75,
        seconds_rank=0.125,
    )
    return mj.SearchResult([fused, ref], [1.5e-6, 2.5e-6], stats, reason)


class Searches:
    """A stand-in search that counts its calls and returns fake_result()."""

    def __init__(self, delay=0.0, reason=""):
        self.calls = 0
        self.delay = delay
        self.reason = reason
        self._lock = threading.Lock()

    def __call__(self):
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        return fake_result(self.reason)


def skip_if_the_core_changed(*digests):
    """The key covers the C++ core's bytes, and an editable install rebuilds the core when a
    process imports it after a C++ edit: processes on either side of such a rebuild rightly
    share no entries."""
    if len(set(digests)) > 1:
        pytest.skip(
            "the C++ core was rebuilt while this test ran (an editable install with "
            "C++ being edited); its processes use different search keys"
        )


def attention(q: int, d: int, kv: int, heads: int = 0, scale: float = 1.0) -> mj.KernelGraph:
    """softmax(scale · Q @ K) @ V with K given as [d, kv], the softmax spelled max -> sub ->
    exp -> sum -> div as the frontend normalizes it; `heads` > 0 adds a leading heads dim."""
    lead = (heads,) if heads else ()
    g = mj.KernelGraph()
    Q, K, V = g.new_input(lead + (q, d)), g.new_input(lead + (d, kv)), g.new_input(lead + (kv, d))
    s = g.matmul(Q, K)
    if scale != 1.0:
        s = g.mul_scalar(s, scale)
    e = g.exp(g.sub(s, g.reduce(s, -1, "max")))
    g.mark_output(g.matmul(g.div(e, g.reduce(e, -1, "sum")), V))
    return g


# (program, reference at shapes small enough for a search of a few seconds, search config)
SEARCHES = {
    "rmsnorm_linear": (
        lambda: paper_graphs.rmsnorm_linear(8, 256, 64, col_tile=16, k_tile=32)[0],
        mj.SearchConfig(max_kernel_ops=1, max_block_ops=5, threads=2),
    ),
    "gated_mlp": (
        lambda: paper_graphs.gated_mlp(8, 128, 32, col_tile=16, k_tile=32)[0],
        mj.SearchConfig(max_kernel_ops=1, max_block_ops=6, threads=2),
    ),
    "lora": (
        lambda: paper_graphs.lora(8, 64, 32, 8, col_tile=16)[0],
        mj.SearchConfig(preset="lora", max_kernel_ops=1, max_block_ops=4, threads=2),
    ),
    "ntrans": (
        lambda: paper_graphs.ntrans(8, 64)[0],
        mj.SearchConfig(max_kernel_ops=1, max_block_ops=5, threads=2),
    ),
    "attention": (
        lambda: attention(16, 8, 32),
        mj.SearchConfig(
            preset="attention", max_kernel_ops=1, max_block_ops=4, max_grids=1, threads=2
        ),
    ),
    "decode_pv": (
        decode_pv,
        mj.SearchConfig(max_kernel_ops=1, max_block_ops=4, threads=2),
    ),
    "decode_softmax": (
        decode_softmax,
        mj.SearchConfig(
            preset="attention", max_kernel_ops=1, max_block_ops=5, time_budget_s=2, threads=2
        ),
    ),
    # grouped-query decode attention: rank-5 products against the cache as stored
    "decode_gqa_pv": (
        decode_gqa_pv,
        mj.SearchConfig(max_kernel_ops=1, max_block_ops=4, time_budget_s=2, threads=2),
    ),
    "decode_gqa_softmax": (
        decode_gqa_softmax,
        mj.SearchConfig(
            preset="attention", max_kernel_ops=1, max_block_ops=5, time_budget_s=2, threads=2
        ),
    ),
    # the paper's split-KV kernel plus a combine kernel
    "gqa_split_kv": (
        lambda: attention(16, 8, 64, heads=1, scale=8**-0.5),
        mj.SearchConfig(
            preset="attention",
            max_kernel_ops=2,
            max_block_graphs=2,
            max_block_ops=6,
            max_block_outputs=2,
            max_grid_axes=1,
            max_block_inputs=3,
            max_grids=1,
            max_forloop_ranges=1,
            time_budget_s=100,
            threads=2,
        ),
    ),
}
# float32 against a float64 interpreter and against XLA's own summation order: normwise,
# relative to the output's largest element (sums of hundreds of products cancel to near-zero
# elements whose error scales with the operands, not with the result).
RTOL = 1e-5

# Compiling costs ~2.5 s a kernel on these machines: the best few fused candidates suffice.
FUSED_PER_PROGRAM = 2


def fused_candidates(result):
    """The best few candidates with the most graph-defined ops (the split-KV pair has two)."""
    fused = [g for g in result.candidates if any(op.kind == "customized" for op in g.ops)]
    most = max((sum(op.kind == "customized" for op in g.ops) for g in fused), default=0)
    return [g for g in fused if sum(op.kind == "customized" for op in g.ops) == most][
        :FUSED_PER_PROGRAM
    ]


def install_counters(set_attribute) -> dict:
    """Counts searches (mj.search's calls: a deepened search climbs several rungs of the C++
    search in one) and calls of the kernel compiler; `set_attribute` is monkeypatch.setattr
    here and the builtin setattr in the second process."""
    counts = {"search": 0, "compile": 0}
    real_search, real_compile = search_module.search, toolchain.compile_cpu_library

    def search(*args, **kwargs):
        counts["search"] += 1
        return real_search(*args, **kwargs)

    def compile_library(source, library, include=None):
        counts["compile"] += 1
        return real_compile(source, library, include)

    set_attribute(search_module, "search", search)
    set_attribute(toolchain, "compile_cpu_library", compile_library)
    return counts


def norm_then_library_matmul(original: mj.KernelGraph) -> mj.KernelGraph:
    """rmsnorm_linear's reference (rms_norm(X)·g @ W) with the norm in a generated kernel and
    the product left to XLA's dot, which widens a bfloat16 W in memory first."""
    x, g, w = original.inputs
    kg = mj.KernelGraph()
    X, G, W = (kg.new_input(t.shape, t.dtype) for t in (x, g, w))
    bg = mj.BlockGraph(grid=(1, 1, 1), forloop_range=1)
    xb = bg.new_input(X, imap=(-1, -1, -1), fmap=-1)
    gb = bg.new_input(G, imap=(-1, -1, -1), fmap=-1)
    bg.new_output(bg.mul(bg.rms_norm(xb, eps=1e-6), gb), omap=(-1, -1, -1))
    (normed,) = kg.customized([X, G], bg)
    kg.mark_output(kg.matmul(normed, W))
    return kg

"""@mirage_jax.optimize on a Llama-style decoder block written in Flax, nnx and linen, in
float32 and bfloat16: RMSNorm, grouped-query attention (4 query heads over
2 kv heads, causal), SwiGLU MLP, residuals. The output matches jax.jit within the dtype's
tolerance, the lowered HLO holds the generated kernels' custom calls, every region is
accounted for, and a second process with the warm cache optimizes the block without
searching or compiling anything.

The block runs on one sequence, x [SEQ, HIDDEN] (a kernel graph's matmul takes a 2-D lhs
here), and projects q, k and v with one fused weight, as many Llama implementations do."""

import json
import os
import subprocess
import sys
import textwrap

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from kernel_test_support import session_kernel_cache  # noqa: F401 (autouse fixture)
from optimize_test_support import kernels_always_win, normwise  # noqa: F401 (fixture)

import mirage_jax as mj
from mirage_jax.superopt import float_check as _float_check
from mirage_jax.superopt import search as _search

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, SEQ = 64, 4, 2, 16, 128, 8
# A small search budget per region: the RMSNorm+QKV region's fused kernel is found in
# seconds; bigger regions spend the budget and stay on XLA (reported).
CONFIG = _search.SearchConfig(max_kernel_ops=1, max_block_ops=5, time_budget_s=5)


def attention(q, k, v):
    """Causal GQA: q [S, H·D], k and v [S, KV·D]; the query heads sharing a kv head are
    stacked along the rows, so each kv head is one [G·S, D] x [S, D] attention."""
    s, g = q.shape[0], HEADS // KV_HEADS
    q = q.reshape(s, KV_HEADS, g, HEAD_DIM).transpose(1, 2, 0, 3).reshape(KV_HEADS, g * s, HEAD_DIM)
    k = k.reshape(s, KV_HEADS, HEAD_DIM).transpose(1, 0, 2)
    v = v.reshape(s, KV_HEADS, HEAD_DIM).transpose(1, 0, 2)
    rows = jnp.tile(jnp.arange(s), g)
    bias = jnp.where(rows[:, None] >= jnp.arange(s)[None, :], 0.0, -1e9).astype(q.dtype)
    scores = jnp.einsum("kqd,ktd->kqt", q, k) * (HEAD_DIM**-0.5) + bias
    o = jnp.einsum("kqt,ktd->kqd", jax.nn.softmax(scores, axis=-1), v)
    return o.reshape(KV_HEADS, g, s, HEAD_DIM).transpose(2, 0, 1, 3).reshape(s, HEADS * HEAD_DIM)


def split_qkv(qkv):
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    return qkv[:, :q], qkv[:, q : q + kv], qkv[:, q + kv :]


class NnxBlock(nnx.Module):
    def __init__(self, dtype, rngs):
        def linear(i, o):
            return nnx.Linear(i, o, use_bias=False, dtype=dtype, param_dtype=dtype, rngs=rngs)

        self.norm1 = nnx.RMSNorm(HIDDEN, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.qkv = linear(HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM)
        self.o = linear(HEADS * HEAD_DIM, HIDDEN)
        self.norm2 = nnx.RMSNorm(HIDDEN, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.gate, self.up, self.down = (
            linear(HIDDEN, FFN),
            linear(HIDDEN, FFN),
            linear(FFN, HIDDEN),
        )

    def __call__(self, x):
        x = x + self.o(attention(*split_qkv(self.qkv(self.norm1(x)))))
        h = self.norm2(x)
        return x + self.down(nnx.silu(self.gate(h)) * self.up(h))


class LinenBlock(nn.Module):
    dtype: object = jnp.float32

    @nn.compact
    def __call__(self, x):
        def linear(o, name):
            return nn.Dense(o, use_bias=False, dtype=self.dtype, param_dtype=self.dtype, name=name)

        h = nn.RMSNorm(dtype=self.dtype, param_dtype=self.dtype, name="norm1")(x)
        x = x + linear(HIDDEN, "o")(
            attention(*split_qkv(linear((HEADS + 2 * KV_HEADS) * HEAD_DIM, "qkv")(h)))
        )
        h = nn.RMSNorm(dtype=self.dtype, param_dtype=self.dtype, name="norm2")(x)
        return x + linear(HIDDEN, "down")(nn.silu(linear(FFN, "gate")(h)) * linear(FFN, "up")(h))


def block(kind: str, dtype):
    """(function, its arguments): the block's forward pass as a function of arrays."""
    dtype = jnp.dtype(dtype)
    x = jnp.asarray(np.random.default_rng(0).standard_normal((SEQ, HIDDEN)), dtype)
    if kind == "nnx":
        return (lambda model, x: model(x)), (NnxBlock(dtype, nnx.Rngs(0)), x)
    model = LinenBlock(dtype)
    return model.apply, (model.init(jax.random.key(0), x), x)


def optimize_block(kind: str, dtype):
    fn, args = block(kind, dtype)
    opt = mj.optimize(fn, config=CONFIG)
    return fn, opt, args


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kind", ["nnx", "linen"])
def test_the_decoder_block_matches_jit_and_runs_kernels(kind, dtype, kernels_always_win):
    fn, opt, args = optimize_block(kind, dtype)
    got = opt(*args)
    want = jax.jit(fn)(*args)
    assert got.dtype == want.dtype and got.shape == want.shape == (SEQ, HIDDEN)
    # the float check's own bound: max(4·eps(dtype), 2^-13), normwise
    assert normwise(got, want) < _float_check.tolerance([dtype])
    hlo = jax.jit(opt).lower(*args).as_text()
    reports = opt.regions(*args)
    kernels = [r for r in reports if r.chosen == "kernel"]
    assert hlo.count("mj_cpu_") >= len(kernels) >= 1
    # The first region is RMSNorm followed by the fused QKV projection.
    first = reports[0]
    assert first.chosen == "kernel", first
    assert "rsqrt" in first.primitives and first.primitives.count("dot_general") == 1
    # Every region is a kernel or says why not; the attention and MLP regions are found, and
    # the down projection, which contracts over the gated MLP's output, is a region of its
    # own (mirage_jax/frontend/chains.py).
    assert len(reports) == 4 and all(r.reason for r in reports)
    assert any("exp" in r.primitives and "reduce_max" in r.primitives for r in reports)
    (mlp,) = [r for r in reports if "logistic" in r.primitives]
    assert mlp.primitives.count("dot_general") >= 2
    assert reports[-1].primitives.count("dot_general") == 1


# The test modules a subprocess imports: this one and the shared helpers in tests/.
SUBPROCESS_PATH = os.pathsep.join(
    [
        os.path.dirname(os.path.abspath(__file__)),
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    ]
)

# The same block optimized in a fresh process that shares only the cache directory.
WARM_PROCESS = textwrap.dedent("""
    import json, os, sys
    sys.path[:0] = sys.argv[1].split(os.pathsep)
    import jax
    from mirage_jax.runtime import profile as _profile
    from mirage_jax.superopt import search_cache
    import test_flax_decoder_block as t
    import search_test_support

    _profile.median_times = lambda fns, args, **_: ({n: (1.0 if n == "xla" else 0.5)
                                                for n in fns}, 1)
    counts = search_test_support.install_counters(setattr)
    fn, opt, args = t.optimize_block("nnx", "float32")
    out = opt(*args)
    counts["error"] = t.normwise(out, jax.jit(fn)(*args))
    counts["chosen"] = [r.chosen for r in opt.regions(*args)]
    counts["core"] = search_cache._core_digest()
    print(json.dumps(counts))
""")


def test_a_warm_cache_optimizes_the_block_without_searching_or_compiling(
    kernels_always_win, session_kernel_cache
):
    from search_test_support import skip_if_the_core_changed

    from mirage_jax.superopt import search_cache

    _fn, opt, args = optimize_block("nnx", "float32")
    opt(*args)  # warms the cache (or finds it warm from the test above)
    chosen = [r.chosen for r in opt.regions(*args)]
    env = {**os.environ, "MIRAGE_JAX_CACHE": str(session_kernel_cache)}
    done = subprocess.run(
        [sys.executable, "-P", "-c", WARM_PROCESS, SUBPROCESS_PATH],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    skip_if_the_core_changed(counts.pop("core"), search_cache._core_digest())
    assert counts.pop("error") < _float_check.tolerance(["float32"])
    assert counts == {"search": 0, "compile": 0, "chosen": chosen}


def test_nnx_grad_through_the_optimized_block_matches(kernels_always_win):
    fn, opt, (model, x) = optimize_block("nnx", "float32")

    def loss(f):
        return lambda model, x: jnp.sum(f(model, x) ** 2)

    got = jax.tree_util.tree_leaves(nnx.grad(loss(opt), argnums=(0, 1))(model, x))
    want = jax.tree_util.tree_leaves(nnx.grad(loss(fn), argnums=(0, 1))(model, x))
    assert len(got) == len(want) == 8  # seven weights and x
    for a, b in zip(got, want):
        assert normwise(a, b) < _float_check.tolerance(["float32"])
    assert opt.regions(model, x)[0].chosen == "kernel"

"""Generated CPU kernels (cc/codegen/cpu) against the reference interpreter and against XLA:
every paper μGraph, bf16/f16 storage, odd tile sizes, rank-3 batched tiles, the
online-softmax accumulators and a grid large enough to spread over the thread pool."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    assert_close,
    random_inputs,
    session_kernel_cache,
    storage_rtol,
)

import mirage_jax as mj
from mirage_jax.ir.paper_graphs import (
    PROGRAMS,
    flash_attention_online,
    gated_mlp,
    ntrans,
    rmsnorm_linear,
)


def check_against_interpreter(fused, inputs, what):
    got = jax.jit(mj.compile(fused))(*inputs)
    want = fused.evaluate(inputs)
    assert len(got) == len(want)
    for i, (g, w, t) in enumerate(zip(got, want, fused.outputs)):
        assert g.dtype == jnp.dtype(t.dtype), f"{what}: output {i} dtype"
        assert_close(g, w, storage_rtol(t.dtype), f"{what}: output {i} vs interpreter")
    return got


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_paper_program_matches_interpreter_and_xla_f32(name):
    program = PROGRAMS[name]
    ref, fused = program.build(**program.small)
    inputs = random_inputs(fused)
    got = check_against_interpreter(fused, inputs, name)
    # Both float32 results are held to the float64 truth of the original program, not to each
    # other: a difference of two float32 results carries both their errors, and on gqa_decode
    # XLA's own error (≈1e-5, it rounds after every op) is six times the kernel's. XLA is held
    # normwise for that reason; the kernel element by element.
    truth = ref.evaluate(inputs)
    xla = jax.jit(mj.compile(ref))(*inputs)
    for i, (g, x, t) in enumerate(zip(got, xla, truth)):
        assert_close(g, t, storage_rtol("float32"), f"{name}: output {i} vs the original")
        assert_close(x, t, storage_rtol("float32"), f"{name}: XLA's output {i}", floor=1)


# A bf16 reference lowered to XLA rounds after every op; the kernel rounds once. Softmax and
# rms_norm chains take a handful of roundings, each at most half a bf16 ulp of an operand, so
# the comparison is normwise (an output that cancels to near zero keeps its operands' error).
_BF16_CHAIN_RTOL = 4 * float(jnp.finfo(jnp.bfloat16).eps)


@pytest.mark.parametrize("name", ["rmsnorm_linear", "flash_attention_online"])
def test_paper_program_bf16(name):
    program = PROGRAMS[name]
    ref, fused = program.build(**program.small, dtype="bfloat16")
    inputs = random_inputs(fused, seed=1)
    got = check_against_interpreter(fused, inputs, f"{name} bf16")
    xla = jax.jit(mj.compile(ref))(*inputs)
    for i, (g, x) in enumerate(zip(got, xla)):
        assert_close(g, x, _BF16_CHAIN_RTOL, f"{name} bf16: output {i} vs XLA", floor=1.0)


def test_gated_mlp_f16():
    program = PROGRAMS["gated_mlp"]
    _, fused = program.build(**program.small, dtype="float16")
    check_against_interpreter(fused, random_inputs(fused, seed=2), "gated_mlp f16")


def test_odd_tiles_rmsnorm_linear():
    # Tiles of 3 rows, 3 (k) and 5 (columns): no panel of the matmul is full.
    _, fused = rmsnorm_linear(batch=3, hidden=15, out_features=10, col_tile=5, k_tile=3)
    check_against_interpreter(fused, random_inputs(fused, seed=3), "rmsnorm_linear odd tiles")


def test_odd_tiles_online_softmax():
    _, fused = flash_attention_online(heads=2, q_len=6, kv_len=15, head_dim=3, q_tiles=2, kv_tile=5)
    check_against_interpreter(fused, random_inputs(fused, seed=4), "flash attention odd tiles")


def _decode_online_softmax(grid, forloop):
    """Decode attention Q[2,4,3,8] K[2,4,8,20] V[2,4,20,8] as one online-softmax kernel whose
    grid splits the batch only: each block's K tile holds 4 heads' [8, 20/F] matrices."""
    kg = mj.KernelGraph()
    q = kg.new_input((2, 4, 3, 8))
    k = kg.new_input((2, 4, 8, 20))
    v = kg.new_input((2, 4, 20, 8))
    bg = mj.BlockGraph(grid=grid, forloop_range=forloop)
    imap = (0, -1, -1) if grid[0] > 1 else (-1, -1, -1)
    tq = bg.new_input(q, imap=imap, fmap=-1)
    tk = bg.new_input(k, imap=imap, fmap=3)
    tv = bg.new_input(v, imap=imap, fmap=2)
    s = bg.mul_scalar(bg.matmul(tq, tk), 8**-0.5)
    bg.new_output(bg.div(bg.accum_exp_matmul(s, tv), bg.accum_exp_sum_last(s)), omap=imap)
    (out,) = kg.customized([q, k, v], bg)
    kg.mark_output(out)
    return kg


@pytest.mark.parametrize("grid, forloop", [((2, 1, 1), 4), ((1, 1, 1), 5)])
def test_batched_strided_tiles_read_in_place(grid, forloop):
    # K's tiles are stacks of matrices whose rows lie a whole kernel row (20 floats) apart:
    # read in place (no copy into the arena), with the batch stride of the kernel tensor.
    # V's tiles too when the loop cuts their rows: only the online softmax's product reads them.
    fused = _decode_online_softmax(grid, forloop)
    source = mj.generate_code(fused)
    for i in (1, 2):
        assert f"io.in{i} + " in source and f"tile_origin = io.in{i}" not in source, source
    inputs = random_inputs(fused, seed=12)
    (got,) = jax.jit(mj.compile(fused))(*inputs)
    # Normwise: the outputs are weighted sums that cancel to near zero in places, where the
    # float32 error of the exps (a few ulps of the largest terms) is all that is left.
    (interpreted,) = fused.evaluate(inputs)
    assert_close(got, interpreted, storage_rtol("float32"), "vs interpreter", floor=1.0)
    q, k, v = (np.asarray(x, np.float64) for x in inputs)
    scores = q @ k * 8**-0.5
    p = np.exp(scores - scores.max(-1, keepdims=True))
    assert_close(
        got,
        (p / p.sum(-1, keepdims=True)) @ v,
        storage_rtol("float32"),
        "vs numpy softmax attention",
        floor=1.0,
    )


def test_tiles_of_both_heads_with_cut_rows_read_in_place():
    # A GQA block's tiles hold both heads and a slice of the rows: S[2, 4, 8] and X[2, 4, 8]
    # of [2, 16, 32] and [2, 16, 8], V[2, 8, 4] of [2, 32, 4]. The matrices of V (the softmax
    # product's) and X (a matmul's A) are read in place, one kernel matrix apart; S, read row
    # by row by the softmax, is copied.
    kg = mj.KernelGraph()
    S, V = kg.new_input((2, 16, 32)), kg.new_input((2, 32, 4))
    X, W = kg.new_input((2, 16, 8)), kg.new_input((2, 8, 4))
    bg = mj.BlockGraph(grid=(4, 1, 1), forloop_range=4)
    s = bg.new_input(S, imap=(1, -1, -1), fmap=2)
    v = bg.new_input(V, imap=(-1, -1, -1), fmap=1)
    x = bg.new_input(X, imap=(1, -1, -1), fmap=-1)
    w = bg.new_input(W, imap=(-1, -1, -1), fmap=-1)
    bg.new_output(bg.div(bg.accum_exp_matmul(s, v), bg.accum_exp_sum_last(s)), omap=(1, -1, -1))
    bg.new_output(bg.matmul(x, w), omap=(1, -1, -1))
    for t in kg.customized([S, V, X, W], bg):
        kg.mark_output(t)
    source = mj.generate_code(kg)
    for i in (1, 2):
        assert f"io.in{i} + " in source and f"tile_origin = io.in{i}" not in source, source
    assert "tile_origin = io.in0" in source, source
    rng = np.random.default_rng(13)
    scores = rng.standard_normal((2, 16, 32)) * 30  # large logits: every row's max matters
    scores[1, 5, :16] = -np.inf  # the first two slices of a row masked
    inputs = [scores, *(rng.standard_normal(t.shape) for t in kg.inputs[1:])]
    got = jax.jit(mj.compile(kg))(*[jnp.asarray(a, jnp.float32) for a in inputs])
    s64, v64, x64, w64 = (np.asarray(a, np.float64) for a in inputs)
    p = np.exp(s64 - s64.max(-1, keepdims=True))
    want = [(p / p.sum(-1, keepdims=True)) @ v64, x64 @ w64]
    for i, (g, t) in enumerate(zip(got, want)):
        assert_close(g, t, storage_rtol("float32"), f"output {i} vs numpy", floor=1.0)


def test_block_groups_stream_side_by_side_weight_tiles():
    # 16 blocks of 4 columns: blocks run in groups of 4 and each group's matmuls run as one
    # product over the group's side-by-side W tiles (mj_cpu::matmul_group).
    for what, (_, fused) in [
        (
            "rmsnorm_linear",
            rmsnorm_linear(batch=3, hidden=16, out_features=64, col_tile=4, k_tile=4),
        ),
        (
            "rmsnorm_linear bs1",
            rmsnorm_linear(batch=1, hidden=16, out_features=64, col_tile=4, k_tile=4),
        ),
        ("gated_mlp", gated_mlp(batch=2, hidden=16, intermediate=64, col_tile=4, k_tile=4)),
    ]:
        assert "mj_cpu::matmul_group<" in mj.generate_code(fused), what
        check_against_interpreter(fused, random_inputs(fused, seed=9), f"{what} block groups")


@pytest.mark.parametrize("loop", [1, 2])
def test_matmul_remainders_with_strided_weight_tiles(loop):
    # 11 rows (a full panel of 8 and 3), 53 columns (full panels, a partial panel and a scalar
    # tail), k tiles of 19 (chunks of 8, 8 and 3); W tiles are read in place, 106 floats a row.
    # With one iteration the product is stored directly, with two it adds into accum_sum.
    kg = mj.KernelGraph()
    X = kg.new_input((11, 19 * loop))
    W = kg.new_input((19 * loop, 106))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=loop)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1 if loop > 1 else -1)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0 if loop > 1 else -1)
    y = bg.matmul(x, w)
    bg.new_output(bg.accum_sum(y) if loop > 1 else y, omap=(1, -1, -1))
    (Y,) = kg.customized([X, W], bg)
    kg.mark_output(Y)
    # Small integers keep every partial sum exact, so any misplaced row, column or k shows.
    rng = np.random.default_rng(10)
    inputs = [jnp.asarray(rng.integers(-3, 4, t.shape), dtype=t.dtype) for t in kg.inputs]
    check_against_interpreter(kg, inputs, f"matmul remainders, {loop}")


def _rank3_batched_graph():
    """Rank-3 tiles on a 3-axis grid: a batched matmul whose weight broadcasts over the
    batch, accum_sum and accum_rms_last over one loop, a broadcast bias, every unary op,
    reduce and concat in the epilogue, and outputs stored as float32, bfloat16 and float16."""
    kg = mj.KernelGraph()
    X = kg.new_input((4, 6, 10))
    W = kg.new_input((10, 15))
    bias = kg.new_input((1, 15))
    bg = mj.BlockGraph(grid=(3, 2, 1), forloop_range=2)
    x = bg.new_input(X, imap=(-1, 0, -1), fmap=2)  # [2, 6, 5]
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)  # [5, 5]
    b = bg.new_input(bias, imap=(1, -1, -1), fmap=-1)  # [1, 5], loop-invariant
    acc = bg.accum_sum(bg.matmul(x, w))
    rms = bg.accum_rms_last(x, eps=1e-3)
    y = bg.div(bg.gelu(bg.add(acc, b)), rms)  # [2, 6, 5]
    bg.new_output(y, omap=(2, 0, -1))
    stats = bg.concat(bg.reduce(y, 1, "max"), bg.reduce(y, 1, "mean"), dim=1)  # [2, 2, 5]
    bg.new_output(bg.sub(stats, bg.reduce(y, 1, "sum")), omap=(2, 0, -1), dtype="bfloat16")
    sq = bg.square(y)
    mix = bg.add(bg.silu(y), bg.mul(bg.relu(bg.neg(y)), bg.sigmoid(y)))
    mix = bg.add(mix, bg.exp(bg.mul_scalar(y, -0.5)))
    mix = bg.add(mix, bg.rsqrt(bg.add_scalar(sq, 1.0)))
    mix = bg.add(mix, bg.recip(bg.add_scalar(sq, 2.0)))
    mix = bg.add(mix, bg.sqrt(bg.add_scalar(sq, 0.25)))
    mix = bg.add(mix, bg.reduce(y, 2, "sum"))
    bg.new_output(mix, omap=(2, 0, -1), dtype="float16")
    for t in kg.customized([X, W, bias], bg):
        kg.mark_output(t)
    return kg


def test_rank3_batched_tiles_and_every_op():
    kg = _rank3_batched_graph()
    check_against_interpreter(kg, random_inputs(kg, seed=5), "rank-3 batched")


def test_online_softmax_stats_with_rescaling_and_empty_tiles():
    # Scores of spread 20 make the running max grow across iterations, so the sums must be
    # rescaled; row 0 of each batch sees only -inf in the first iteration.
    kg = mj.KernelGraph()
    S = kg.new_input((2, 4, 12))
    V = kg.new_input((12, 3))
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=3)
    s = bg.mul_scalar(bg.new_input(S, imap=(0, -1, -1), fmap=2), 2.0)  # [1, 4, 4]
    v = bg.new_input(V, imap=(-1, -1, -1), fmap=0)  # [4, 3]
    bg.new_output(bg.accum_max_last(s), omap=(0, -1, -1))
    bg.new_output(bg.div(bg.accum_exp_matmul(s, v), bg.accum_exp_sum_last(s)), omap=(0, -1, -1))
    for t in kg.customized([S, V], bg):
        kg.mark_output(t)
    scores, values = random_inputs(kg, seed=6)
    scores = (scores * 10.0).at[:, 0, :4].set(-jnp.inf)
    got = check_against_interpreter(kg, [scores, values], "online softmax")
    assert np.all(np.isfinite(np.asarray(got[1])))


def test_many_blocks_on_the_thread_pool_repeatedly():
    # 64 blocks: the caller and the pool's tasks all take chunks; repeated calls catch tasks
    # that outlive a call.
    _, fused = ntrans(batch=64, hidden=8, row_tile=1)
    inputs = random_inputs(fused, seed=7)
    f = jax.jit(mj.compile(fused))
    want = fused.evaluate(inputs)[0]
    for _ in range(20):
        assert_close(f(*inputs)[0], want, storage_rtol("float32"), "ntrans 64 blocks")


def test_storage_conversions_round_like_numpy():
    """f32 -> bf16/f16 stores round to nearest even, including halfway cases, subnormals,
    overflow to inf, inf and nan; bf16/f16 -> f32 loads are exact."""
    specials = np.array(
        [
            0.0,
            -0.0,
            1.0,
            -2.5,
            65504.0,
            65519.0,
            65520.0,
            1e6,
            -1e6,
            6.1e-5,
            3.0e-8,
            2.9e-8,
            6.0e-8,
            1.0e-10,
            np.inf,
            -np.inf,
            np.nan,
            1.0 + 2.0**-11,
            1.0 + 3 * 2.0**-11,
            1.0 + 2.0**-8,
            1.0 + 3 * 2.0**-8,
            3.4e38,
            1e-40,
        ],
        dtype=np.float32,
    )
    rng = np.random.default_rng(8)
    randoms = (rng.standard_normal(41) * np.exp2(rng.integers(-30, 20, 41))).astype(np.float32)
    x = np.concatenate([specials, randoms])
    n = x.size
    kg = mj.KernelGraph()
    X = kg.new_input((n,))
    H = kg.new_input((n,), "float16")
    B = kg.new_input((n,), "bfloat16")
    bg = mj.BlockGraph(grid=(1, 1, 1), forloop_range=1)
    x_tile = bg.new_input(X, imap=(-1, -1, -1), fmap=-1)
    bg.new_output(x_tile, omap=(-1, -1, -1), dtype="float16")
    bg.new_output(x_tile, omap=(-1, -1, -1), dtype="bfloat16")
    bg.new_output(bg.new_input(H, imap=(-1, -1, -1), fmap=-1), omap=(-1, -1, -1), dtype="float32")
    bg.new_output(bg.new_input(B, imap=(-1, -1, -1), fmap=-1), omap=(-1, -1, -1), dtype="float32")
    for t in kg.customized([X, H, B], bg):
        kg.mark_output(t)
    with np.errstate(over="ignore"):  # the overflow to inf is one of the cases under test
        halves = x.astype(np.float16)
    brains = x.astype(jnp.bfloat16)
    to_f16, to_bf16, from_f16, from_bf16 = mj.compile(kg)(
        x, jnp.asarray(halves), jnp.asarray(brains)
    )

    def bits(a, dtype):
        return np.asarray(a).view(dtype)

    finite = ~np.isnan(x)
    np.testing.assert_array_equal(bits(to_f16, np.uint16)[finite], halves.view(np.uint16)[finite])
    np.testing.assert_array_equal(bits(to_bf16, np.uint16)[finite], brains.view(np.uint16)[finite])
    assert np.all(np.isnan(np.asarray(to_f16)[~finite]))
    assert np.all(np.isnan(np.asarray(to_bf16, dtype=np.float32)[~finite]))
    np.testing.assert_array_equal(np.asarray(from_f16), halves.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(from_bf16), brains.astype(np.float32))

"""μGraphs of model programs beyond the Mirage paper's evaluation, written by hand.

The programs Llama-, GPT- and BERT-style models run that the paper does not: LayerNorm
before a projection, the SwiGLU MLP with its down projection, attention under an additive
mask. Each builder returns ``(reference, fused)`` as `paper_graphs` does: the program as the
frontend makes it, and the best form known for it, so that `benchmarks/search_reach.py` can
ask whether the search finds that form (or a faster one) and tests can check that the form
is right. Defaults are Llama-7B-like shapes at 8 rows.
"""

from __future__ import annotations

import math

from mirage_jax.ir.graph import BlockGraph, KernelGraph
from mirage_jax.ir.handles import Tensor
from mirage_jax.ir.paper_graphs import GraphPair, PaperProgram, _parts, gated_mlp_kernel

# ------------------------------------------------------------------------ layernorm_linear


def layernorm_linear(
    batch: int = 8,
    hidden: int = 4096,
    out_features: int = 4096,
    col_tile: int = 64,
    k_tile: int = 128,
    eps: float = 1e-6,
    dtype: str = "float32",
) -> GraphPair:
    """((X - mean) / sqrt(var + eps)) @ W, the LayerNorm of flax's
    `nn.LayerNorm(use_fast_variance=False, use_scale=False, use_bias=False)` and Equinox's.
    Fused: one kernel whose blocks own ``col_tile`` output columns; the row means come from
    X read whole before the loop, and the loop accumulates the matmul of the centered tiles
    and their mean square together, dividing after it. The centered form, not Σx and Σx²:
    `E[x²] − mean²` cancels to nothing in float32 on rows with a large mean."""
    grid = _parts(out_features, col_tile, "out_features / col_tile")
    steps = _parts(hidden, k_tile, "hidden / k_tile")

    ref = KernelGraph()
    X = ref.new_input((batch, hidden), dtype)
    W = ref.new_input((hidden, out_features), dtype)
    mean = ref.reduce(X, 1, "mean")
    var = ref.reduce(ref.square(ref.sub(X, mean)), 1, "mean")
    y = ref.mul(ref.sub(X, mean), ref.rsqrt(ref.add_scalar(var, eps)))
    ref.mark_output(ref.matmul(y, W))

    fused = KernelGraph()
    X = fused.new_input((batch, hidden), dtype)
    W = fused.new_input((hidden, out_features), dtype)
    bg = BlockGraph(grid=(grid, 1, 1), forloop_range=steps)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    x_whole = bg.new_input(X, imap=(-1, -1, -1), fmap=-1)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    centered = bg.sub(x, bg.reduce(x_whole, 1, "mean"))
    y = bg.div(bg.accum_sum(bg.matmul(centered, w)), bg.accum_rms_last(centered, eps))
    bg.new_output(y, omap=(1, -1, -1))
    (Y,) = fused.customized([X, X, W], bg)
    fused.mark_output(Y)
    return ref, fused


# ----------------------------------------------------------------------------- swiglu_down


def swiglu_down(
    batch: int = 8,
    hidden: int = 4096,
    intermediate: int = 11008,
    col_tile: int = 64,
    k_tile: int = 128,
    down_k_tile: int = 128,
    dtype: str = "float32",
) -> GraphPair:
    """(silu(X@W1) * (X@W3)) @ W2, Llama's MLP. Fused: two kernels, the paper's gated MLP
    (both matmuls on shared X tiles, silu and the product in the epilogue) and the down
    projection over ``col_tile`` output columns. One kernel would recompute the gated MLP's
    whole [batch, intermediate] activation in every block of the down projection."""
    gate_grid = _parts(intermediate, col_tile, "intermediate / col_tile")
    gate_steps = _parts(hidden, k_tile, "hidden / k_tile")
    down_grid = _parts(hidden, col_tile, "hidden / col_tile")
    down_steps = _parts(intermediate, down_k_tile, "intermediate / down_k_tile")

    ref = KernelGraph()
    X = ref.new_input((batch, hidden), dtype)
    W1 = ref.new_input((hidden, intermediate), dtype)
    W3 = ref.new_input((hidden, intermediate), dtype)
    W2 = ref.new_input((intermediate, hidden), dtype)
    h = ref.mul(ref.silu(ref.matmul(X, W1)), ref.matmul(X, W3))
    ref.mark_output(ref.matmul(h, W2))

    fused = KernelGraph()
    X = fused.new_input((batch, hidden), dtype)
    W1 = fused.new_input((hidden, intermediate), dtype)
    W3 = fused.new_input((hidden, intermediate), dtype)
    W2 = fused.new_input((intermediate, hidden), dtype)
    H = gated_mlp_kernel(fused, X, W1, W3, gate_grid, gate_steps)
    down = BlockGraph(grid=(down_grid, 1, 1), forloop_range=down_steps)
    h = down.new_input(H, imap=(-1, -1, -1), fmap=1)
    w2 = down.new_input(W2, imap=(1, -1, -1), fmap=0)
    down.new_output(down.accum_sum(down.matmul(h, w2)), omap=(1, -1, -1))
    (Y,) = fused.customized([H, W2], down)
    fused.mark_output(Y)
    return ref, fused


# ------------------------------------------------------------------------ masked_attention


def masked_attention(
    heads: int = 2,
    q_len: int = 256,
    kv_len: int = 4096,
    head_dim: int = 64,
    q_tiles: int = 16,
    kv_tile: int = 128,
    dtype: str = "float32",
) -> GraphPair:
    """softmax(Q·K/√d + mask)·V with an additive mask shared by the heads ([1, q_len,
    kv_len]: padding and causal masks as models pass them), at gqa_prefill's shapes. Fused:
    one kernel with the stabilized online softmax, every block owning query rows of a head
    and walking the keys with the mask's matching tile."""
    _parts(q_len, q_tiles, "q_len / q_tiles")
    steps = _parts(kv_len, kv_tile, "kv_len / kv_tile")
    scale = 1.0 / math.sqrt(head_dim)

    def inputs(g: KernelGraph) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return (
            g.new_input((heads, q_len, head_dim), dtype),
            g.new_input((heads, head_dim, kv_len), dtype),
            g.new_input((heads, kv_len, head_dim), dtype),
            g.new_input((1, q_len, kv_len), dtype),
        )

    ref = KernelGraph()
    Q, K, V, mask = inputs(ref)
    s = ref.add(ref.mul_scalar(ref.matmul(Q, K), scale), mask)
    e = ref.exp(ref.sub(s, ref.reduce(s, -1, "max")))
    ref.mark_output(ref.matmul(ref.div(e, ref.reduce(e, -1, "sum")), V))

    fused = KernelGraph()
    Q, K, V, mask = inputs(fused)
    bg = BlockGraph(grid=(heads, q_tiles, 1), forloop_range=steps)
    q = bg.new_input(Q, imap=(0, 1, -1), fmap=-1)
    k = bg.new_input(K, imap=(0, -1, -1), fmap=2)
    v = bg.new_input(V, imap=(0, -1, -1), fmap=1)
    m = bg.new_input(mask, imap=(-1, 1, -1), fmap=2)
    s = bg.add(bg.mul_scalar(bg.matmul(q, k), scale), m)
    bg.new_output(bg.div(bg.accum_exp_matmul(s, v), bg.accum_exp_sum_last(s)), omap=(0, 1, -1))
    (Y,) = fused.customized([Q, K, V, mask], bg)
    fused.mark_output(Y)
    return ref, fused


PROGRAMS: dict[str, PaperProgram] = {
    p.name: p
    for p in (
        PaperProgram(
            "layernorm_linear",
            "LayerNorm (centered, two-pass) then a matmul, in one kernel",
            layernorm_linear,
            dict(batch=2, hidden=16, out_features=12, col_tile=4, k_tile=4),
        ),
        PaperProgram(
            "swiglu_down",
            "Llama's MLP: the gated MLP kernel, then the down projection's",
            swiglu_down,
            dict(batch=2, hidden=8, intermediate=12, col_tile=4, k_tile=4, down_k_tile=4),
        ),
        PaperProgram(
            "masked_attention",
            "attention under an additive mask, online softmax in one kernel",
            masked_attention,
            dict(heads=2, q_len=8, kv_len=16, head_dim=4, q_tiles=2, kv_tile=4),
        ),
    )
}

"""The μGraphs of the Mirage paper's evaluation (arXiv 2405.05751), written by hand.

Each builder returns ``(reference, fused)``: the reference is the program as a user writes it
(kernel-level ops only), the fused graph is the μGraph the paper reports finding, with its
block graphs. Defaults are the paper's shapes; every tiling choice is a parameter so that tests
can build the same structure at small sizes. ``PROGRAMS`` names them for the demo and for the
search tests (``small`` holds shapes that interpret in milliseconds).

Attention programs take K pre-transposed (``[..., d, kv]``) because the IR has no transpose:
the frontend folds transposes into input layouts (mirage_jax/frontend/to_graph.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from mirage_jax.ir.graph import BlockGraph, KernelGraph, _Graph
from mirage_jax.ir.handles import Tensor

GraphPair = tuple[KernelGraph, KernelGraph]
Triple = tuple[int, int, int]


def _parts(total: int, parts: int, what: str) -> int:
    """total / parts, refusing splits that do not divide (the IR would refuse them later, with a
    message that names tensors rather than the parameter the caller chose)."""
    if parts < 1 or total % parts:
        raise ValueError(f"{what}: {total} is not divisible into {parts} equal parts")
    return total // parts


# --------------------------------------------------------------------------- rmsnorm_linear


def rmsnorm_linear(
    batch: int = 8,
    hidden: int = 4096,
    out_features: int = 6144,
    col_tile: int = 64,
    k_tile: int = 128,
    eps: float = 1e-6,
    dtype: str = "float32",
) -> GraphPair:
    """rms_norm(X)·G @ W. Fused: one kernel whose blocks own ``col_tile`` output columns and
    walk the hidden dim in ``k_tile`` steps; the normalization is divided out after the matmul,
    with mean(x²) accumulated over the same loop (the paper's RMSNorm+Linear μGraph)."""
    grid = _parts(out_features, col_tile, "out_features / col_tile")
    steps = _parts(hidden, k_tile, "hidden / k_tile")

    ref = KernelGraph()
    X = ref.new_input((batch, hidden), dtype)
    G = ref.new_input((hidden,), dtype)
    W = ref.new_input((hidden, out_features), dtype)
    ref.mark_output(ref.matmul(ref.mul(ref.rms_norm(X, eps=eps), G), W))

    fused = KernelGraph()
    X = fused.new_input((batch, hidden), dtype)
    G = fused.new_input((hidden,), dtype)
    W = fused.new_input((hidden, out_features), dtype)
    bg = BlockGraph(grid=(grid, 1, 1), forloop_range=steps)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    g = bg.new_input(G, imap=(-1, -1, -1), fmap=0)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=0)
    acc = bg.accum_sum(bg.matmul(bg.mul(x, g), w))
    mean_sq = bg.accum_mean_last(bg.square(x))
    bg.new_output(bg.div(acc, bg.sqrt(bg.add_scalar(mean_sq, eps))), omap=(1, -1, -1))
    (Y,) = fused.customized([X, G, W], bg)
    fused.mark_output(Y)
    return ref, fused


# ------------------------------------------------------------------------------- gated_mlp


def gated_mlp(
    batch: int = 8,
    hidden: int = 4096,
    intermediate: int = 4096,
    col_tile: int = 64,
    k_tile: int = 128,
    dtype: str = "float32",
) -> GraphPair:
    """silu(X@W1) * (X@W3). Fused: one kernel; both matmuls read the same X tile each
    iteration, and silu and the product run once in the epilogue."""
    grid = _parts(intermediate, col_tile, "intermediate / col_tile")
    steps = _parts(hidden, k_tile, "hidden / k_tile")

    ref = KernelGraph()
    X = ref.new_input((batch, hidden), dtype)
    W1 = ref.new_input((hidden, intermediate), dtype)
    W3 = ref.new_input((hidden, intermediate), dtype)
    ref.mark_output(ref.mul(ref.silu(ref.matmul(X, W1)), ref.matmul(X, W3)))

    fused = KernelGraph()
    X = fused.new_input((batch, hidden), dtype)
    W1 = fused.new_input((hidden, intermediate), dtype)
    W3 = fused.new_input((hidden, intermediate), dtype)
    fused.mark_output(gated_mlp_kernel(fused, X, W1, W3, grid, steps))
    return ref, fused


def gated_mlp_kernel(
    fused: KernelGraph, X: Tensor, W1: Tensor, W3: Tensor, grid: int, steps: int
) -> Tensor:
    """The paper's gated-MLP kernel on `fused`'s tensors: `grid` blocks of output columns,
    `steps` iterations along the hidden dim."""
    bg = BlockGraph(grid=(grid, 1, 1), forloop_range=steps)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=1)
    w1 = bg.new_input(W1, imap=(1, -1, -1), fmap=0)
    w3 = bg.new_input(W3, imap=(1, -1, -1), fmap=0)
    gate = bg.accum_sum(bg.matmul(x, w1))
    up = bg.accum_sum(bg.matmul(x, w3))
    bg.new_output(bg.mul(bg.silu(gate), up), omap=(1, -1, -1))
    (Y,) = fused.customized([X, W1, W3], bg)
    return Y


# ------------------------------------------------------------------------------------ lora


def lora(
    tokens: int = 16,
    d_in: int = 256,
    d_out: int = 4096,
    rank: int = 16,
    col_tile: int = 128,
    dtype: str = "float32",
) -> GraphPair:
    """X@W + (X@A)@B. Fused: concat(X, X·A) @ concat(W, B) in one kernel. X·A is computed
    inside the block graph (every block recomputes the small [tokens, rank] product from the
    whole X and A) so the program is a single kernel. The for-loop range is 1: a loop over
    d_in would cut X but the concatenated X·A part has no d_in to cut, and a body tensor cannot
    be concatenated with an epilogue one."""
    grid = _parts(d_out, col_tile, "d_out / col_tile")

    ref = KernelGraph()
    X = ref.new_input((tokens, d_in), dtype)
    W = ref.new_input((d_in, d_out), dtype)
    A = ref.new_input((d_in, rank), dtype)
    B = ref.new_input((rank, d_out), dtype)
    ref.mark_output(ref.add(ref.matmul(X, W), ref.matmul(ref.matmul(X, A), B)))

    fused = KernelGraph()
    X = fused.new_input((tokens, d_in), dtype)
    W = fused.new_input((d_in, d_out), dtype)
    A = fused.new_input((d_in, rank), dtype)
    B = fused.new_input((rank, d_out), dtype)
    bg = BlockGraph(grid=(grid, 1, 1), forloop_range=1)
    x = bg.new_input(X, imap=(-1, -1, -1), fmap=-1)
    w = bg.new_input(W, imap=(1, -1, -1), fmap=-1)
    a = bg.new_input(A, imap=(-1, -1, -1), fmap=-1)
    b = bg.new_input(B, imap=(1, -1, -1), fmap=-1)
    xa = bg.matmul(x, a)
    y = bg.matmul(bg.concat(x, xa, 1), bg.concat(w, b, 0))
    bg.new_output(y, omap=(1, -1, -1))
    (Y,) = fused.customized([X, W, A, B], bg)
    fused.mark_output(Y)
    return ref, fused


# ------------------------------------------------------------------------------- attention


def _attention_reference(g: KernelGraph, Q: Tensor, K: Tensor, V: Tensor, scale: float) -> Tensor:
    """softmax(scale·Q@K) @ V with the max stabilizer, as jax.nn.softmax writes it."""
    s = g.mul_scalar(g.matmul(Q, K), scale)
    e = g.exp(g.sub(s, g.reduce(s, -1, "max")))
    return g.matmul(g.div(e, g.reduce(e, -1, "sum")), V)


def _rms_norm_keys(g: _Graph, k: Tensor, eps: float) -> Tensor:
    """rms_norm of every key of a pre-transposed K ([..., d, kv]): the norm runs over dim -2,
    which the rms_norm op (last dim only) cannot do. Written with ops both levels have; a K tile
    always holds whole keys, so the block level computes exactly this on its tile."""
    mean_sq = g.reduce(g.square(k), -2, "mean")
    return g.div(k, g.sqrt(g.add_scalar(mean_sq, eps)))


def _split_kv_partials(
    fused: KernelGraph,
    Q: Tensor,
    K: Tensor,
    V: Tensor,
    *,
    rank: int,
    grid: Triple,
    steps: int,
    q_imap: Triple,
    k_imap: Triple,
    v_imap: Triple,
    omap: Triple,
    scale: float,
    norm_eps: float | None = None,
) -> tuple[Tensor, ...]:
    """Kernel 1 of split-KV attention: every block owns some query rows and one KV slice and
    walks the slice in ``steps`` iterations with the online softmax, so every exp it takes is
    of S - m_b, m_b the row max over its slice. Each block stores its partial exp(S - m_b)·V,
    the partial row sums of exp(S - m_b) and m_b side by side along the last dim, one slot per
    KV slice (omap). With ``norm_eps``, Q rows and K columns are rms-normalized on the tile
    first (QKNorm)."""
    bg = BlockGraph(grid=grid, forloop_range=steps)
    q = bg.new_input(Q, imap=q_imap, fmap=-1)
    k = bg.new_input(K, imap=k_imap, fmap=rank - 1)
    v = bg.new_input(V, imap=v_imap, fmap=rank - 2)
    if norm_eps is not None:
        q = bg.rms_norm(q, eps=norm_eps)
        k = _rms_norm_keys(bg, k, norm_eps)
    s = bg.mul_scalar(bg.matmul(q, k), scale)
    bg.new_output(bg.accum_exp_matmul(s, v), omap=omap)
    bg.new_output(bg.accum_exp_sum_last(s), omap=omap)
    bg.new_output(bg.accum_max_last(s), omap=omap)
    return fused.customized([Q, K, V], bg)


def _combine_partials(
    fused: KernelGraph,
    partial_ev: Tensor,
    partial_sums: Tensor,
    partial_max: Tensor,
    *,
    rank: int,
    grid: Triple,
    splits: int,
    imap: Triple,
    omap: Triple,
) -> Tensor:
    """Kernel 2 of split-KV attention: M, the max of the slices' maxima, is a reduce at the
    kernel level; a for-loop over the partial slots (the last dim) rescales each slot's partials
    by exp(m_b - M) <= 1 and sums them, and the epilogue divides. The slot holding the row max
    has weight 1 and a row sum >= 1, so the sum divided by is >= 1: no overflow, no 0 / 0."""
    top = fused.reduce(partial_max, rank - 1, "max")
    bg = BlockGraph(grid=grid, forloop_range=splits)
    ev = bg.new_input(partial_ev, imap=imap, fmap=rank - 1)
    sums = bg.new_input(partial_sums, imap=imap, fmap=rank - 1)
    m = bg.new_input(partial_max, imap=imap, fmap=rank - 1)
    mx = bg.new_input(top, imap=imap, fmap=-1)
    w = bg.exp(bg.sub(m, mx))
    out = bg.div(bg.accum_sum(bg.mul(w, ev)), bg.accum_sum(bg.mul(w, sums)))
    bg.new_output(out, omap=omap)
    (out,) = fused.customized([partial_ev, partial_sums, partial_max, top], bg)
    return out


def _attention_inputs(
    g: KernelGraph, lead: tuple[int, ...], rows: int, kv_len: int, head_dim: int, dtype: str
) -> tuple[Tensor, Tensor, Tensor]:
    Q = g.new_input((*lead, rows, head_dim), dtype)
    K = g.new_input((*lead, head_dim, kv_len), dtype)
    V = g.new_input((*lead, kv_len, head_dim), dtype)
    return Q, K, V


def _gqa_prefill_pair(
    heads: int,
    q_len: int,
    kv_len: int,
    head_dim: int,
    kv_splits: int,
    q_tiles: int,
    forloop: int,
    scale: float | None,
    dtype: str,
    norm_eps: float | None,
) -> GraphPair:
    _parts(q_len, q_tiles, "q_len / q_tiles")
    _parts(kv_len, kv_splits * forloop, "kv_len / (kv_splits * forloop)")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale

    ref = KernelGraph()
    Q, K, V = _attention_inputs(ref, (heads,), q_len, kv_len, head_dim, dtype)
    if norm_eps is not None:
        Q, K = ref.rms_norm(Q, eps=norm_eps), _rms_norm_keys(ref, K, norm_eps)
    ref.mark_output(_attention_reference(ref, Q, K, V, scale))

    fused = KernelGraph()
    Q, K, V = _attention_inputs(fused, (heads,), q_len, kv_len, head_dim, dtype)
    # grid (heads, kv slices, query tiles), as in the paper: Q (0, -1, 1), K (0, 2, -1),
    # V (0, 1, -1), partials stored with omap (0, 2, 1).
    partials = _split_kv_partials(
        fused,
        Q,
        K,
        V,
        rank=3,
        grid=(heads, kv_splits, q_tiles),
        steps=forloop,
        q_imap=(0, -1, 1),
        k_imap=(0, 2, -1),
        v_imap=(0, 1, -1),
        omap=(0, 2, 1),
        scale=scale,
        norm_eps=norm_eps,
    )
    fused.mark_output(
        _combine_partials(
            fused,
            *partials,
            rank=3,
            grid=(heads, q_tiles, 1),
            splits=kv_splits,
            imap=(0, 1, -1),
            omap=(0, 1, -1),
        )
    )
    return ref, fused


def gqa_prefill(
    heads: int = 2,
    q_len: int = 256,
    kv_len: int = 4096,
    head_dim: int = 64,
    kv_splits: int = 8,
    q_tiles: int = 16,
    forloop: int = 4,
    scale: float | None = None,
    dtype: str = "float32",
) -> GraphPair:
    """softmax(scale·Q·K)·V per KV head, with the query heads of a group folded into the rows
    (the paper's Q[2,256,64], K[2,64,4096], V[2,4096,64]). Fused: the paper's two kernels,
    a split-KV kernel with grid (heads, kv_splits, q_tiles) and a combine kernel."""
    return _gqa_prefill_pair(
        heads, q_len, kv_len, head_dim, kv_splits, q_tiles, forloop, scale, dtype, norm_eps=None
    )


def qknorm_gqa(
    heads: int = 2,
    q_len: int = 256,
    kv_len: int = 4096,
    head_dim: int = 64,
    kv_splits: int = 8,
    q_tiles: int = 16,
    forloop: int = 4,
    eps: float = 1e-6,
    scale: float | None = None,
    dtype: str = "float32",
) -> GraphPair:
    """gqa_prefill after rms_norm of every query and every key (over head_dim). Fused: the
    same two kernels, with both norms applied to the tiles inside kernel 1 (a tile always
    holds whole query rows and whole keys, so no extra pass is needed)."""
    return _gqa_prefill_pair(
        heads, q_len, kv_len, head_dim, kv_splits, q_tiles, forloop, scale, dtype, norm_eps=eps
    )


def gqa_decode(
    batch: int = 8,
    kv_heads: int = 8,
    group: int = 4,
    q_len: int = 1,
    kv_len: int = 4096,
    head_dim: int = 128,
    kv_splits: int = 4,
    forloop: int = 8,
    scale: float | None = None,
    dtype: str = "float32",
) -> GraphPair:
    """Grouped-query attention: ``group`` query heads share each KV head. Rank 4:
    Q[batch, kv_heads, group·q_len, d], K[batch, kv_heads, d, kv], V[batch, kv_heads, kv, d].
    Fused: split-KV kernel with grid (batch, kv_heads, kv_splits), every block taking all the
    group's query rows, then the combine kernel."""
    _parts(kv_len, kv_splits * forloop, "kv_len / (kv_splits * forloop)")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    rows = group * q_len

    ref = KernelGraph()
    Q, K, V = _attention_inputs(ref, (batch, kv_heads), rows, kv_len, head_dim, dtype)
    ref.mark_output(_attention_reference(ref, Q, K, V, scale))

    fused = KernelGraph()
    Q, K, V = _attention_inputs(fused, (batch, kv_heads), rows, kv_len, head_dim, dtype)
    partials = _split_kv_partials(
        fused,
        Q,
        K,
        V,
        rank=4,
        grid=(batch, kv_heads, kv_splits),
        steps=forloop,
        q_imap=(0, 1, -1),
        k_imap=(0, 1, 3),
        v_imap=(0, 1, 2),
        omap=(0, 1, 3),
        scale=scale,
    )
    fused.mark_output(
        _combine_partials(
            fused,
            *partials,
            rank=4,
            grid=(batch, kv_heads, 1),
            splits=kv_splits,
            imap=(0, 1, -1),
            omap=(0, 1, -1),
        )
    )
    return ref, fused


def flash_attention_online(
    heads: int = 2,
    q_len: int = 256,
    kv_len: int = 4096,
    head_dim: int = 64,
    q_tiles: int = 16,
    kv_tile: int = 128,
    scale: float | None = None,
    dtype: str = "float32",
) -> GraphPair:
    """The same attention as gqa_prefill in one kernel with the stabilized online softmax:
    every block owns query rows and walks all keys; accum_exp_matmul and accum_exp_sum_last
    share the running max of the scores, and the epilogue divides."""
    _parts(q_len, q_tiles, "q_len / q_tiles")
    steps = _parts(kv_len, kv_tile, "kv_len / kv_tile")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale

    ref = KernelGraph()
    Q, K, V = _attention_inputs(ref, (heads,), q_len, kv_len, head_dim, dtype)
    ref.mark_output(_attention_reference(ref, Q, K, V, scale))

    fused = KernelGraph()
    Q, K, V = _attention_inputs(fused, (heads,), q_len, kv_len, head_dim, dtype)
    bg = BlockGraph(grid=(heads, q_tiles, 1), forloop_range=steps)
    q = bg.new_input(Q, imap=(0, 1, -1), fmap=-1)
    k = bg.new_input(K, imap=(0, -1, -1), fmap=2)
    v = bg.new_input(V, imap=(0, -1, -1), fmap=1)
    s = bg.mul_scalar(bg.matmul(q, k), scale)
    out = bg.div(bg.accum_exp_matmul(s, v), bg.accum_exp_sum_last(s))
    bg.new_output(out, omap=(0, 1, -1))
    (Y,) = fused.customized([Q, K, V], bg)
    fused.mark_output(Y)
    return ref, fused


# ---------------------------------------------------------------------------------- ntrans


def ntrans(
    batch: int = 8, hidden: int = 4096, row_tile: int = 1, eps: float = 1e-6, dtype: str = "float32"
) -> GraphPair:
    """rms_norm(X + α·(rms_norm(H) − X)) (nGPT's normalized update). Fused: one kernel whose
    blocks own ``row_tile`` whole rows; both norms are over a row, so each is an rms_norm on
    the tile, and the for-loop range is 1 (a loop over the hidden dim could accumulate the
    first rms with accum_rms_last, but the second norm needs the whole updated row, which only
    exists after that loop)."""
    grid = _parts(batch, row_tile, "batch / row_tile")

    ref = KernelGraph()
    H = ref.new_input((batch, hidden), dtype)
    X = ref.new_input((batch, hidden), dtype)
    alpha = ref.new_input((batch, hidden), dtype)
    update = ref.mul(alpha, ref.sub(ref.rms_norm(H, eps=eps), X))
    ref.mark_output(ref.rms_norm(ref.add(X, update), eps=eps))

    fused = KernelGraph()
    H = fused.new_input((batch, hidden), dtype)
    X = fused.new_input((batch, hidden), dtype)
    alpha = fused.new_input((batch, hidden), dtype)
    bg = BlockGraph(grid=(grid, 1, 1), forloop_range=1)
    h = bg.new_input(H, imap=(0, -1, -1), fmap=-1)
    x = bg.new_input(X, imap=(0, -1, -1), fmap=-1)
    a = bg.new_input(alpha, imap=(0, -1, -1), fmap=-1)
    z = bg.add(x, bg.mul(a, bg.sub(bg.rms_norm(h, eps=eps), x)))
    bg.new_output(bg.rms_norm(z, eps=eps), omap=(0, -1, -1))
    (Y,) = fused.customized([H, X, alpha], bg)
    fused.mark_output(Y)
    return ref, fused


# -------------------------------------------------------------------------------- registry


@dataclasses.dataclass(frozen=True)
class PaperProgram:
    name: str
    description: str
    build: Callable[..., GraphPair]
    small: dict[str, Any]  # keyword arguments of `build` for a seconds-free test instance


PROGRAMS: dict[str, PaperProgram] = {
    p.name: p
    for p in (
        PaperProgram(
            "rmsnorm_linear",
            "rms_norm(X)·g @ W, the norm divided out after the matmul",
            rmsnorm_linear,
            dict(batch=2, hidden=16, out_features=12, col_tile=4, k_tile=4),
        ),
        PaperProgram(
            "gated_mlp",
            "silu(X@W1) * (X@W3), both matmuls on shared X tiles",
            gated_mlp,
            dict(batch=2, hidden=16, intermediate=12, col_tile=4, k_tile=4),
        ),
        PaperProgram(
            "lora",
            "X@W + (X@A)@B as concat(X, X·A) @ concat(W, B) in one kernel",
            lora,
            dict(tokens=4, d_in=8, d_out=12, rank=2, col_tile=4),
        ),
        PaperProgram(
            "gqa_prefill",
            "softmax(Q·K/√d)·V, split-KV kernel + combine kernel",
            gqa_prefill,
            dict(heads=2, q_len=8, kv_len=16, head_dim=4, kv_splits=2, q_tiles=2, forloop=2),
        ),
        PaperProgram(
            "gqa_decode",
            "grouped-query decode attention (rank 4), split-KV + combine",
            gqa_decode,
            dict(
                batch=2, kv_heads=2, group=2, q_len=1, kv_len=16, head_dim=4, kv_splits=2, forloop=2
            ),
        ),
        PaperProgram(
            "flash_attention_online",
            "attention in one kernel with online softmax",
            flash_attention_online,
            dict(heads=2, q_len=8, kv_len=16, head_dim=4, q_tiles=2, kv_tile=4),
        ),
        PaperProgram(
            "qknorm_gqa",
            "rms_norm on Q and K, then split-KV attention",
            qknorm_gqa,
            dict(heads=2, q_len=8, kv_len=16, head_dim=4, kv_splits=2, q_tiles=2, forloop=2),
        ),
        PaperProgram(
            "ntrans",
            "rms_norm(X + α·(rms_norm(H) − X)), rows over the grid",
            ntrans,
            dict(batch=4, hidden=8, row_tile=2),
        ),
    )
}

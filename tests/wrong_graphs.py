"""Hand-built μGraphs that are equal to their reference in algebra but wrong in floating
point: what the float checks must catch when a verifier miss lets one through."""

import math

from mirage_jax.ir.graph import BlockGraph, KernelGraph


def split_kv_without_maxima(dtype="float32", heads=2, q_len=8, kv_len=16, head_dim=4):
    """softmax(scale·Q·K)·V, and the split-KV form as the paper writes it: each slice stores
    its exp(scale·Q·K)·V and exp row sums, no maxima, and a combine kernel adds and divides.
    Equal in algebra; exp overflows once the logits pass about 88. (The paper graph
    gqa_prefill now carries per-slice maxima, so this form is built here.)"""
    scale = 1.0 / math.sqrt(head_dim)
    ref = KernelGraph()
    Q = ref.new_input((heads, q_len, head_dim), dtype)
    K = ref.new_input((heads, head_dim, kv_len), dtype)
    V = ref.new_input((heads, kv_len, head_dim), dtype)
    s = ref.mul_scalar(ref.matmul(Q, K), scale)
    e = ref.exp(ref.sub(s, ref.reduce(s, -1, "max")))
    ref.mark_output(ref.matmul(ref.div(e, ref.reduce(e, -1, "sum")), V))

    fused = KernelGraph()
    Q = fused.new_input((heads, q_len, head_dim), dtype)
    K = fused.new_input((heads, head_dim, kv_len), dtype)
    V = fused.new_input((heads, kv_len, head_dim), dtype)
    bg = BlockGraph(grid=(heads, 2, 1), forloop_range=2)
    q = bg.new_input(Q, imap=(0, -1, -1), fmap=-1)
    k = bg.new_input(K, imap=(0, 2, -1), fmap=2)
    v = bg.new_input(V, imap=(0, 1, -1), fmap=1)
    e = bg.exp(bg.mul_scalar(bg.matmul(q, k), scale))
    bg.new_output(bg.accum_sum(bg.matmul(e, v)), omap=(0, 2, -1))
    bg.new_output(bg.accum_sum_last(e), omap=(0, 2, -1))
    ev, sums = fused.customized([Q, K, V], bg)
    cb = BlockGraph(grid=(heads, 1, 1), forloop_range=2)
    a = cb.new_input(ev, imap=(0, -1, -1), fmap=2)
    b = cb.new_input(sums, imap=(0, -1, -1), fmap=2)
    cb.new_output(cb.div(cb.accum_sum(a), cb.accum_sum_last(b)), omap=(0, -1, -1))
    (Y,) = fused.customized([ev, sums], cb)
    fused.mark_output(Y)
    return ref, fused

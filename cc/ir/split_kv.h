#pragma once
// The split-KV (FlashDecoding) form of a one-kernel attention: how the search reaches the
// paper's two-kernel decode μGraph, whose limits (kernel ops, block ops) it exceeds. A kernel
// whose for-loop walks the keys with the online softmax (its one output
// accum_exp_matmul(s, V) / accum_exp_sum_last(s)) runs one block per query tile, however
// few those are: a decode step at batch 1 has one per KV head, fewer than a GPU's
// multiprocessors. Split, a grid axis the kernel leaves at 1 cuts the keys into `splits`
// slices, each block walking its slice with the online softmax and storing its partial
// exp(s - m_b)·V, its partial sum of exp(s - m_b) and its max m_b side by side along the
// last dim; a kernel-level reduce takes M = max_b m_b, and a combine kernel walks the slices
// summing exp(m_b - M)·partials and divides. Every exp is of a value minus a max over it,
// so the verifier's float-safety rule (docs/ir-semantics.md) accepts it as it accepts the
// one-kernel form. The result is verified like any other candidate.
#include <vector>

#include "cc/ir/graph.h"

namespace mj::ir {

// g with its first online-softmax kernel split, once for each count in `splits` (above 1)
// that divides that kernel's for-loop range; empty when g has no such kernel (or it has no
// grid axis left at 1, or stores along its last dim).
std::vector<KernelGraph> split_kv(const KernelGraph& g, const std::vector<int>& splits);

}  // namespace mj::ir

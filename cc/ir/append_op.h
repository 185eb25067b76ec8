#pragma once
// Re-adds an op through the builders, so every rule is checked again: how search candidates
// grow, how the verifier rebuilds a graph at other shapes, and how cut and splice copy ops.
#include <vector>

#include "cc/ir/graph.h"

namespace mj::ir {

// Adds to g an op of like.kind with like's attributes (scalar, dim, reduce) on g's tensors
// `inputs`; returns its output id. Computation ops only: inputs, outputs and customized ops
// need what their level's builders take. Accumulators need g to be a BlockGraph. IrError for
// anything the builders reject.
int append_op(Graph& g, const Op& like, const std::vector<int>& inputs);

// Appends kernel-level `op` of `from` to `to` (any kind: an input becomes a new input, an
// output marks one), its inputs renamed through `id` (from's ids -> to's), and records the
// new ids of its outputs in `id`: how cut, splice and the output cones copy programs.
void copy_kernel_op(const KernelGraph& from, const Op& op, KernelGraph& to, std::vector<int>& id);

// The same for block-level `op` of `from` (an input keeps its imap, fmap and kernel shape, an
// output its omap and dtype; the graph's grid and loop are `to`'s): how a block graph is
// rebuilt over a coarser loop or with its inputs in another order.
void copy_block_op(const BlockGraph& from, const Op& op, BlockGraph& to, std::vector<int>& id);

}  // namespace mj::ir

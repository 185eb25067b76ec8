#pragma once
// A kernel graph as the sequence of kernels that run it, in op order:
// - each customized op is one kernel (block_graph_work.h);
// - each predefined matmul, and each concat, is one library call that reads its operands and
//   writes its result at their storage dtypes;
// - predefined elementwise ops, reduce and rms_norm are grouped XLA-like into fusions. A
//   tensor stays inside a fusion (never reaches memory) when it is not a program output, it
//   has exactly one consuming op, both ends are fusible, and either
//     the consumer is elementwise and the tensor has the consumer's result shape (a
//     broadcast operand is computed first, as XLA does with a reduction feeding a broadcast),
//   or the consumer is reduce/rms_norm and the producer is elementwise (input fusion);
//   and the merged fusion holds at most one reduce/rms_norm. A fusion reads each tensor
//   coming from outside once, and writes each tensor used outside it (or output) once.
// Program inputs and outputs themselves cost nothing: their producers and consumers pay.
#include <vector>

#include "cc/cost/kernel_work.h"
#include "cc/ir/graph.h"

namespace mj::cost {

std::vector<KernelWork> kernel_graph_work(const ir::KernelGraph& g);

// Σ KernelWork::cut_row_bytes over the graph's kernels: how much of its reads come a piece of
// each row per loop step, which orders candidates the model ties.
double cut_row_bytes(const ir::KernelGraph& g);

}  // namespace mj::cost

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

}  // namespace mj::ir

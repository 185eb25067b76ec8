#pragma once
// Flops of one op of either level, counted the roofline way: one flop per element for every
// elementwise op (exp and sqrt included), 2·m·n·k for a matmul. What matters for ranking is
// that a graph doing more arithmetic counts more, not the instruction count.
#include "cc/ir/graph.h"

namespace mj::cost {

struct OpFlops {
  double total = 0;
  // The part done by matmuls whose operands are both f16/bf16: tensor cores on a GPU.
  double low_precision_matmul = 0;
};

// Zero for inputs, outputs, concat (data movement) and customized ops (see
// block_graph_work.h, which sums the block graph's ops).
OpFlops op_flops(const ir::Graph& g, const ir::Op& op);

// As a double: byte and flop totals are products of many dims, and meet rates anyway.
double tensor_elements(const ir::Shape& s);

}  // namespace mj::cost

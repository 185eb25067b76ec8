#include "cc/search/block_op_rules.h"

namespace mj::search {

using ir::BlockGraph;
using ir::is_accumulator;
using ir::Op;
using ir::OpKind;
using ir::Phase;

std::optional<Phase> result_phase(const BlockGraph& g, const Op& op) {
  bool body = false, epilogue = false;
  for (int t : op.inputs) {
    const Phase p = g.tensor(t).phase;
    body |= p == Phase::kBody;
    epilogue |= p == Phase::kEpilogue;
  }
  if (body && epilogue) return std::nullopt;
  if (is_accumulator(op.kind)) {
    if (!body) return std::nullopt;  // accumulating a loop-invariant only scales it by F
    return Phase::kEpilogue;
  }
  return body ? Phase::kBody : epilogue ? Phase::kEpilogue : Phase::kInvariant;
}

bool accumulates_loop_index_only(const Op& op, const DimClasses& x, int loop_class) {
  if (!is_accumulator(op.kind) || loop_class == kNoClass) return true;
  const size_t keep = op.kind == OpKind::kAccumSum ? x.size() : x.size() - 1;
  for (size_t d = 0; d < keep; ++d) {
    if (x[d] == loop_class) return false;
  }
  return true;
}

bool reduces_split_index(const Op& op, const DimClasses& x, const BlockLayout& layout) {
  int reduced = kNoClass;
  if (op.kind == OpKind::kReduce) {
    reduced = x[op.dim];
  } else if (is_accumulator(op.kind) && op.kind != OpKind::kAccumSum) {
    reduced = x.back();
  }
  if (reduced == kNoClass || reduced == kUnitClass) return false;
  for (int a = 0; a < 3; ++a) {
    if (layout.grid[a] > 1 && layout.axis_class[a] == reduced) return true;
  }
  return false;
}

bool rescales_by_block_max(const Op& op, const DimClasses& x, const BlockLayout& layout) {
  const bool online = op.kind == OpKind::kAccumExpSumLast || op.kind == OpKind::kAccumExpMatmul;
  return online && reduces_split_index(op, x, layout);
}

}  // namespace mj::search

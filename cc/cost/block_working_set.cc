#include "cc/cost/block_working_set.h"

#include <algorithm>

#include "cc/cost/op_flops.h"
#include "cc/ir/thread_fusion.h"

namespace mj::cost {

using ir::BlockGraph;
using ir::is_accumulator;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::Tensor;
using ir::thread_fusion_groups;

namespace {

constexpr double kComputeBytes = 4;  // f32

// Whether tensor t, produced by a computation op, must live in a buffer rather than in
// registers.
bool needs_buffer(const BlockGraph& g, const std::vector<int>& group, int t) {
  const int producer = g.tensor(t).producer;
  if (is_accumulator(g.ops()[producer].kind)) return true;  // state carried across iterations
  for (size_t o = 0; o < g.ops().size(); ++o) {
    const Op& op = g.ops()[o];
    if (op.kind == OpKind::kOutput) continue;
    if (std::find(op.inputs.begin(), op.inputs.end(), t) == op.inputs.end()) continue;
    if (group[o] != group[producer]) return true;
  }
  return false;
}

}  // namespace

double block_working_set_bytes(const BlockGraph& g) {
  const std::vector<int> group = thread_fusion_groups(g);
  const bool double_buffered = g.forloop_range() > 1;
  double loop = 0, epilogue = 0;
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kOutput) continue;
    for (int t : op.outputs) {
      const Tensor& x = g.tensor(t);
      if (op.kind == OpKind::kInput) {
        const double bytes = tensor_elements(x.shape) * dtype_bytes(x.dtype);
        if (x.phase == Phase::kBody) {
          loop += double_buffered ? 2 * bytes : bytes;
        } else {
          loop += bytes;
          epilogue += bytes;
        }
        continue;
      }
      if (!needs_buffer(g, group, t)) continue;
      const double bytes = tensor_elements(x.shape) * kComputeBytes;
      if (is_accumulator(op.kind) || x.phase == Phase::kInvariant) {
        loop += bytes;
        epilogue += bytes;
      } else if (x.phase == Phase::kBody) {
        loop += bytes;
      } else {
        epilogue += bytes;
      }
    }
  }
  return std::max(loop, epilogue);
}

}  // namespace mj::cost

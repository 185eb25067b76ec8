#include "cc/cost/cpu_vector_cost.h"

#include "cc/cost/op_flops.h"

namespace mj::cost {

using ir::BlockGraph;
using ir::Op;
using ir::OpKind;
using ir::Shape;

double cpu_extra_element_flops(OpKind kind, bool generated) {
  switch (kind) {
    case OpKind::kExp: return kExpFlops - 1;
    case OpKind::kSigmoid:
    case OpKind::kSilu: return 47;
    case OpKind::kGelu: return 60;
    case OpKind::kErf:
    case OpKind::kErfc: return generated ? 110 : kExpFlops;
    case OpKind::kGeluErf: return generated ? 110 : kExpFlops;  // an erfc and 3 flops
    case OpKind::kDiv:
    case OpKind::kRecip: return 12;
    case OpKind::kSqrt: return 16;
    case OpKind::kRsqrt: return 26;
    default: return 0;
  }
}

namespace {

bool is_softmax_accumulator(OpKind k) {
  return k == OpKind::kAccumExpSumLast || k == OpKind::kAccumExpMatmul ||
         k == OpKind::kAccumMaxLast;
}

// A row reduction over `elements` values in rows of `row_length`: each row's fold of its
// vector partials and the work per value beyond the one flop op_flops counts.
double row_reduction_flops(double elements, double row_length) {
  return elements / row_length * kRowFoldFlops + elements * kRowElementFlops;
}

}  // namespace

double block_op_cpu_extra_flops(const BlockGraph& g, const Op& op, std::set<int>& scores_seen) {
  const Shape& in = g.tensor(op.inputs.empty() ? op.outputs[0] : op.inputs[0]).shape;
  const double elements = tensor_elements(in), row = double(in.empty() ? 1 : in.back());
  double extra = 0;
  // The running max, and the exps for the accumulators that take them (accum_max_last
  // alone does not), each counted once per score tile: the exps' key is -1 - s.
  const int s = is_softmax_accumulator(op.kind) ? op.inputs[0] : -1;
  if (s >= 0 && scores_seen.insert(s).second) extra += row_reduction_flops(elements, row);
  if (s >= 0 && op.kind != OpKind::kAccumMaxLast && scores_seen.insert(-1 - s).second) {
    extra += elements * kExpFlops;
  }
  switch (op.kind) {
    case OpKind::kAccumExpSumLast:
    case OpKind::kAccumSumLast:
    case OpKind::kAccumMeanLast:
    case OpKind::kAccumRmsLast: return extra + row_reduction_flops(elements, row);
    case OpKind::kRmsNorm:
      return row_reduction_flops(elements, row) +
             elements * cpu_extra_element_flops(OpKind::kDiv, true);
    case OpKind::kReduce:
      return op.dim + 1 == int(in.size()) ? row_reduction_flops(elements, row) : 0;
    default: break;
  }
  if (ir::is_elementwise(op.kind)) {
    extra += tensor_elements(g.tensor(op.outputs[0]).shape) *
             cpu_extra_element_flops(op.kind, /*generated=*/true);
  }
  return extra;
}

}  // namespace mj::cost

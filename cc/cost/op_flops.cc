#include "cc/cost/op_flops.h"

namespace mj::cost {

using ir::DType;
using ir::Graph;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::is_elementwise;

namespace {

bool is_low_precision(DType d) { return d == DType::kF16 || d == DType::kBF16; }

// [..., m, k] @ [..., k, n] -> [..., m, n]: 2 flops per multiply-add.
double matmul_flops(const Graph& g, int a, int result) {
  return 2.0 * tensor_elements(g.tensor(result).shape) * double(g.tensor(a).shape.back());
}

}  // namespace

double tensor_elements(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= double(d);
  return n;
}

OpFlops op_flops(const Graph& g, const Op& op) {
  OpFlops f;
  if (is_elementwise(op.kind)) {
    f.total = tensor_elements(g.tensor(op.outputs[0]).shape);
    return f;
  }
  const auto in_elems = [&](int i) { return tensor_elements(g.tensor(op.inputs[i]).shape); };
  switch (op.kind) {
    case OpKind::kMatmul:
    case OpKind::kAccumExpMatmul: {
      const double mm = matmul_flops(g, op.inputs[0], op.outputs[0]);
      const bool low = is_low_precision(g.tensor(op.inputs[0]).dtype) &&
                       is_low_precision(g.tensor(op.inputs[1]).dtype);
      f.low_precision_matmul = low ? mm : 0;
      // The online-softmax form also exponentiates and rescales every score.
      f.total = mm + (op.kind == OpKind::kAccumExpMatmul ? 2 * in_elems(0) : 0);
      return f;
    }
    case OpKind::kReduce:
    case OpKind::kAccumSum:
    case OpKind::kAccumSumLast:
    case OpKind::kAccumMeanLast:
    case OpKind::kAccumMaxLast:
      f.total = in_elems(0);
      return f;
    case OpKind::kAccumRmsLast:
    case OpKind::kAccumExpSumLast:  // square (or exp) then add
      f.total = 2 * in_elems(0);
      return f;
    case OpKind::kRmsNorm:  // square and sum, then divide
      f.total = 3 * in_elems(0);
      return f;
    default:
      return f;
  }
}

}  // namespace mj::cost

#include "cc/cost/op_flops.h"

namespace mj::cost {

using ir::DType;
using ir::Graph;
using ir::is_elementwise;
using ir::Op;
using ir::OpKind;
using ir::Shape;

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
  // ops.def's flops per element: of the result for elementwise ops, else of input 0.
  const int per_element = ir::op_info(op.kind).flops;
  OpFlops f;
  if (per_element > 0) {
    const int counted = is_elementwise(op.kind) ? op.outputs[0] : op.inputs[0];
    f.total = per_element * tensor_elements(g.tensor(counted).shape);
  }
  if (op.kind == OpKind::kMatmul || op.kind == OpKind::kAccumExpMatmul) {
    const double mm = matmul_flops(g, op.inputs[0], op.outputs[0]);
    const bool low = is_low_precision(g.tensor(op.inputs[0]).dtype) &&
                     is_low_precision(g.tensor(op.inputs[1]).dtype);
    f.low_precision_matmul = low ? mm : 0;
    f.total += mm;
  }
  return f;
}

}  // namespace mj::cost

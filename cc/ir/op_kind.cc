#include "cc/ir/op_kind.h"

#include <string>

#include "cc/ir/error.h"

namespace mj::ir {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kInput: return "input";
    case OpKind::kOutput: return "output";
    case OpKind::kExp: return "exp";
    case OpKind::kSquare: return "square";
    case OpKind::kSqrt: return "sqrt";
    case OpKind::kRsqrt: return "rsqrt";
    case OpKind::kSilu: return "silu";
    case OpKind::kGelu: return "gelu";
    case OpKind::kRelu: return "relu";
    case OpKind::kSigmoid: return "sigmoid";
    case OpKind::kNeg: return "neg";
    case OpKind::kRecip: return "recip";
    case OpKind::kMulScalar: return "mul_scalar";
    case OpKind::kAddScalar: return "add_scalar";
    case OpKind::kAdd: return "add";
    case OpKind::kSub: return "sub";
    case OpKind::kMul: return "mul";
    case OpKind::kDiv: return "div";
    case OpKind::kMatmul: return "matmul";
    case OpKind::kReduce: return "reduce";
    case OpKind::kRmsNorm: return "rms_norm";
    case OpKind::kConcat: return "concat";
    case OpKind::kCustomized: return "customized";
    case OpKind::kAccumSum: return "accum_sum";
    case OpKind::kAccumSumLast: return "accum_sum_last";
    case OpKind::kAccumMeanLast: return "accum_mean_last";
    case OpKind::kAccumRmsLast: return "accum_rms_last";
    case OpKind::kAccumMaxLast: return "accum_max_last";
    case OpKind::kAccumExpSumLast: return "accum_exp_sum_last";
    case OpKind::kAccumExpMatmul: return "accum_exp_matmul";
  }
  return "invalid_op_kind";
}

OpKind parse_op_kind(std::string_view name) {
  for (int k = 0; k <= int(OpKind::kAccumExpMatmul); ++k) {
    if (op_kind_name(OpKind(k)) == name) return OpKind(k);
  }
  throw IrError("parse_op_kind: unknown op '" + std::string(name) + "'");
}

std::string_view reduce_kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::kSum: return "sum";
    case ReduceKind::kMean: return "mean";
    case ReduceKind::kMax: return "max";
  }
  return "invalid_reduce_kind";
}

ReduceKind parse_reduce_kind(std::string_view s) {
  if (s == "sum") return ReduceKind::kSum;
  if (s == "mean") return ReduceKind::kMean;
  if (s == "max") return ReduceKind::kMax;
  throw IrError("reduce: unknown reduce kind '" + std::string(s) +
                "' (expected sum, mean or max)");
}

bool is_unary_elementwise(OpKind k) { return k >= OpKind::kExp && k <= OpKind::kAddScalar; }
bool is_binary_elementwise(OpKind k) { return k >= OpKind::kAdd && k <= OpKind::kDiv; }
bool is_elementwise(OpKind k) { return is_unary_elementwise(k) || is_binary_elementwise(k); }
bool is_accumulator(OpKind k) {
  return k >= OpKind::kAccumSum && k <= OpKind::kAccumExpMatmul;
}

}  // namespace mj::ir

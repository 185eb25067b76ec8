#include "cc/ir/op_kind.h"

#include <string>

#include "cc/ir/error.h"

namespace mj::ir {
namespace {

constexpr OpInfo kOpTable[] = {
#define MJ_OP(Name, name, arity, levels, cls, attr, flops, formula) \
  {name, arity, OpLevels::levels, OpClass::cls, OpAttr::attr, flops},
#include "cc/ir/ops.def"
#undef MJ_OP
};
static_assert(sizeof kOpTable / sizeof kOpTable[0] == size_t(kNumOpKinds));

bool valid(OpKind k) { return int(k) < kNumOpKinds; }

}  // namespace

const OpInfo& op_info(OpKind k) {
  if (!valid(k)) throw IrError("op_info: invalid op kind " + std::to_string(int(k)));
  return kOpTable[int(k)];
}

std::string_view op_kind_name(OpKind k) {
  return valid(k) ? kOpTable[int(k)].name : "invalid_op_kind";
}

OpKind parse_op_kind(std::string_view name) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    if (kOpTable[k].name == name) return OpKind(k);
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
  throw IrError("reduce: unknown reduce kind '" + std::string(s) + "' (expected sum, mean or max)");
}

std::string_view op_class_name(OpClass c) {
  switch (c) {
    case OpClass::kBoundary: return "boundary";
    case OpClass::kUnary: return "unary";
    case OpClass::kBinary: return "binary";
    case OpClass::kMatmul: return "matmul";
    case OpClass::kReduce: return "reduce";
    case OpClass::kRmsNorm: return "rms_norm";
    case OpClass::kConcat: return "concat";
    case OpClass::kCustomized: return "customized";
    case OpClass::kAccum: return "accum";
    case OpClass::kAccumLast: return "accum_last";
    case OpClass::kAccumMatmul: return "accum_matmul";
  }
  return "invalid_op_class";
}

std::string_view op_attr_name(OpAttr a) {
  switch (a) {
    case OpAttr::kNone: return "none";
    case OpAttr::kScalar: return "scalar";
    case OpAttr::kEps: return "eps";
    case OpAttr::kDim: return "dim";
    case OpAttr::kDimReduce: return "dim_reduce";
    case OpAttr::kBlockGraph: return "block_graph";
  }
  return "invalid_op_attr";
}

bool is_unary_elementwise(OpKind k) { return valid(k) && op_info(k).cls == OpClass::kUnary; }
bool is_binary_elementwise(OpKind k) { return valid(k) && op_info(k).cls == OpClass::kBinary; }
bool is_elementwise(OpKind k) { return is_unary_elementwise(k) || is_binary_elementwise(k); }
bool is_accumulator(OpKind k) {
  if (!valid(k)) return false;
  const OpClass c = op_info(k).cls;
  return c == OpClass::kAccum || c == OpClass::kAccumLast || c == OpClass::kAccumMatmul;
}
bool legal_at_kernel_level(OpKind k) { return valid(k) && op_info(k).levels != OpLevels::kBlock; }
bool legal_at_block_level(OpKind k) { return valid(k) && op_info(k).levels != OpLevels::kKernel; }
bool has_scalar(OpKind k) {
  return valid(k) && (op_info(k).attr == OpAttr::kScalar || op_info(k).attr == OpAttr::kEps);
}

}  // namespace mj::ir

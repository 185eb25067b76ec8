#include "cc/codegen/common/scalar_exprs.h"

#include <cmath>
#include <cstdio>

#include "cc/ir/error.h"

namespace mj::codegen::common {

using ir::IrError;
using ir::OpKind;
using ir::op_kind_name;

std::string float_literal(double value, const char* generator) {
  const float f = float(value);
  if (!std::isfinite(f)) {
    throw IrError(std::string(generator) + ": constant " + std::to_string(value) +
                  " is not a finite float32");
  }
  char text[48];
  std::snprintf(text, sizeof text, "%af", double(f));
  return text;
}

std::string unary_expr(const ScalarFunctions& f, OpKind kind, double scalar,
                       const std::string& x) {
  auto call = [&](const char* fn) { return std::string(fn) + "(" + x + ")"; };
  switch (kind) {
    case OpKind::kExp: return call(f.exp);
    case OpKind::kSquare: return call(f.square);
    case OpKind::kSqrt: return call(f.sqrt);
    case OpKind::kRsqrt: return "1.0f / " + call(f.sqrt);
    case OpKind::kSilu: return call(f.silu);
    case OpKind::kGelu: return call(f.gelu_tanh);
    case OpKind::kRelu: return call(f.relu);
    case OpKind::kSigmoid: return call(f.sigmoid);
    case OpKind::kNeg: return "-(" + x + ")";
    case OpKind::kRecip: return "1.0f / (" + x + ")";
    case OpKind::kMulScalar: return "(" + x + ") * " + float_literal(scalar, f.generator);
    case OpKind::kAddScalar: return "(" + x + ") + " + float_literal(scalar, f.generator);
    default:
      throw IrError(std::string(f.generator) + ": " + std::string(op_kind_name(kind)) +
                    " is not a unary elementwise op");
  }
}

std::string binary_expr(const char* generator, OpKind kind, const std::string& a,
                        const std::string& b) {
  const char* op = nullptr;
  switch (kind) {
    case OpKind::kAdd: op = " + "; break;
    case OpKind::kSub: op = " - "; break;
    case OpKind::kMul: op = " * "; break;
    case OpKind::kDiv: op = " / "; break;
    default:
      throw IrError(std::string(generator) + ": " + std::string(op_kind_name(kind)) +
                    " is not a binary elementwise op");
  }
  return "(" + a + ")" + op + "(" + b + ")";
}

}  // namespace mj::codegen::common

#include "cc/codegen/cpu/scalar_exprs.h"

#include <cmath>
#include <cstdio>

#include "cc/ir/error.h"

namespace mj::codegen {

std::string float_literal(double value) {
  const float f = float(value);
  if (!std::isfinite(f)) {
    throw IrError("cpu codegen: constant " + std::to_string(value) +
                  " is not a finite float32");
  }
  char text[48];
  std::snprintf(text, sizeof text, "%af", double(f));
  return text;
}

std::string unary_expr(OpKind kind, double scalar, const std::string& x) {
  switch (kind) {
    case OpKind::kExp: return "mj_cpu::exp_f32(" + x + ")";
    case OpKind::kSquare: return "(" + x + ") * (" + x + ")";
    case OpKind::kSqrt: return "std::sqrt(" + x + ")";
    case OpKind::kRsqrt: return "1.0f / std::sqrt(" + x + ")";
    case OpKind::kSilu: return "mj_cpu::silu(" + x + ")";
    case OpKind::kGelu: return "mj_cpu::gelu_tanh(" + x + ")";
    case OpKind::kRelu: return "mj_cpu::relu(" + x + ")";
    case OpKind::kSigmoid: return "mj_cpu::sigmoid(" + x + ")";
    case OpKind::kNeg: return "-(" + x + ")";
    case OpKind::kRecip: return "1.0f / (" + x + ")";
    case OpKind::kMulScalar: return "(" + x + ") * " + float_literal(scalar);
    case OpKind::kAddScalar: return "(" + x + ") + " + float_literal(scalar);
    default:
      throw IrError("cpu codegen: " + std::string(op_kind_name(kind)) +
                    " is not a unary elementwise op");
  }
}

std::string binary_expr(OpKind kind, const std::string& a, const std::string& b) {
  const char* op = nullptr;
  switch (kind) {
    case OpKind::kAdd: op = " + "; break;
    case OpKind::kSub: op = " - "; break;
    case OpKind::kMul: op = " * "; break;
    case OpKind::kDiv: op = " / "; break;
    default:
      throw IrError("cpu codegen: " + std::string(op_kind_name(kind)) +
                    " is not a binary elementwise op");
  }
  return "(" + a + ")" + op + "(" + b + ")";
}

}  // namespace mj::codegen

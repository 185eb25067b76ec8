#include "cc/codegen/common/scalar_exprs.h"

#include <cmath>
#include <cstdio>

#include "cc/ir/elementwise.h"
#include "cc/ir/error.h"

namespace mj::codegen::common {

using ir::IrError;
using ir::OpKind;

namespace {

// The elementwise formulas of cc/ir/ops.def over expression text: each value is a C++
// expression, parenthesized where it is an operand. The activations call the prelude's
// functions instead of being expanded.
struct TextDomain {
  using Value = std::string;
  const ScalarFunctions& f;

  std::string call(const char* fn, const std::string& x) const {
    return std::string(fn) + "(" + x + ")";
  }
  std::string infix(const std::string& a, const char* op, const std::string& b) const {
    return "(" + a + ")" + op + "(" + b + ")";
  }
  std::string constant(double c) const { return float_literal(c, f.generator); }
  std::string add(const std::string& a, const std::string& b) const { return infix(a, " + ", b); }
  std::string sub(const std::string& a, const std::string& b) const { return infix(a, " - ", b); }
  std::string mul(const std::string& a, const std::string& b) const { return infix(a, " * ", b); }
  std::string div(const std::string& a, const std::string& b) const { return infix(a, " / ", b); }
  std::string neg(const std::string& x) const { return "-(" + x + ")"; }
  std::string recip(const std::string& x) const { return "1.0f / (" + x + ")"; }
  std::string exp(const std::string& x) const { return call(f.exp, x); }
  std::string sqrt(const std::string& x) const { return call(f.sqrt, x); }
  std::string relu(const std::string& x) const { return call(f.relu, x); }
  std::string erf(const std::string& x) const { return call(f.erf, x); }
  std::string select(const std::string& mask, const std::string& x, double c) const {
    return "((" + mask + ") != 0.0f ? (" + x + ") : " + float_literal(c, f.generator) + ")";
  }
};

std::string square(const TextDomain& d, const std::string& x) { return d.call(d.f.square, x); }
std::string sigmoid(const TextDomain& d, const std::string& x) { return d.call(d.f.sigmoid, x); }
std::string silu(const TextDomain& d, const std::string& x) { return d.call(d.f.silu, x); }
std::string gelu(const TextDomain& d, const std::string& x) { return d.call(d.f.gelu_tanh, x); }
std::string erfc(const TextDomain& d, const std::string& x) { return d.call(d.f.erfc, x); }

}  // namespace

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

std::string unary_expr(const ScalarFunctions& f, OpKind kind, double scalar, const std::string& x) {
  return ir::apply_unary(TextDomain{f}, kind, scalar, x, f.generator);
}

std::string binary_expr(const ScalarFunctions& f, OpKind kind, double scalar, const std::string& a,
                        const std::string& b) {
  return ir::apply_binary(TextDomain{f}, kind, scalar, a, b, f.generator);
}

}  // namespace mj::codegen::common

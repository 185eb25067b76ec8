#include "cc/codegen/cpu/scalar_exprs.h"

#include "cc/codegen/common/scalar_exprs.h"

namespace mj::codegen::cpu {

using ir::OpKind;

namespace {

// The functions of prelude.cc (erf_f32 and erfc_f32: NaN in NaN out, the limits at ±inf, as
// lax.erf and lax.erfc) and the C++ library's sqrt.
constexpr common::ScalarFunctions kCpu{"cpu codegen",     "mj_cpu::exp_f32", "mj_cpu::square",
                                       "std::sqrt",       "mj_cpu::silu",    "mj_cpu::gelu_tanh",
                                       "mj_cpu::relu",    "mj_cpu::sigmoid", "mj_cpu::erf_f32",
                                       "mj_cpu::erfc_f32"};

}  // namespace

std::string float_literal(double value) { return common::float_literal(value, kCpu.generator); }

std::string unary_expr(OpKind kind, double scalar, const std::string& x) {
  return common::unary_expr(kCpu, kind, scalar, x);
}

std::string binary_expr(OpKind kind, double scalar, const std::string& a, const std::string& b) {
  return common::binary_expr(kCpu, kind, scalar, a, b);
}

}  // namespace mj::codegen::cpu

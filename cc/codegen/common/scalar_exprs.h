#pragma once
// Expression text for one float32 value, shared by the CPU and CUDA generators: exact
// literals, and the elementwise ops applied to operand expressions with the formulas of
// cc/ir/ops.def (the reference semantics, cc/ir/elementwise.h). Each backend names the
// functions its prelude defines for them.
#include <string>

#include "cc/ir/op_kind.h"

namespace mj::codegen::common {

// The prelude functions of one backend, and its name for error messages.
struct ScalarFunctions {
  const char* generator;  // "cpu codegen", "cuda codegen"
  const char* exp;
  const char* square;
  const char* sqrt;
  const char* silu;
  const char* gelu_tanh;
  const char* relu;
  const char* sigmoid;
  const char* erf;
  const char* erfc;
};

// An exact float32 literal (hex float), so a constant means the same in the kernel as in the
// float32 interpreter; IrError naming the generator for a value float32 cannot hold.
std::string float_literal(double value, const char* generator);

std::string unary_expr(const ScalarFunctions& f, ir::OpKind kind, double scalar,
                       const std::string& x);
std::string binary_expr(const ScalarFunctions& f, ir::OpKind kind, double scalar,
                        const std::string& a, const std::string& b);

}  // namespace mj::codegen::common

#pragma once
// C++ expression text for one float32 value: literals, and the elementwise ops applied to
// operand expressions, with the formulas of cc/ir/elementwise.h (the reference semantics).
#include <string>

#include "cc/ir/op_kind.h"

namespace mj::codegen::cpu {

// An exact float32 literal (hex float), so a constant means the same in the kernel as in the
// float32 interpreter.
std::string float_literal(double value);

std::string unary_expr(ir::OpKind kind, double scalar, const std::string& x);
std::string binary_expr(ir::OpKind kind, double scalar, const std::string& a, const std::string& b);

}  // namespace mj::codegen::cpu

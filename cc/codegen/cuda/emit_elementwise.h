#pragma once
// Fused elementwise passes (cc/ir/thread_fusion.h): one loop over the pass's result, each thread
// computing its elements through the whole chain in registers and storing only the end.
// The scalar formulas are those of cc/ir/elementwise.h, the reference semantics.
#include <string>
#include <vector>

#include "cc/codegen/cuda/tile_access.h"
#include "cc/ir/op_kind.h"

namespace mj::codegen::cuda {

// An exact float32 literal (hex float), so a constant means the same as in the interpreter.
std::string float_literal(double value);
std::string unary_expr(ir::OpKind kind, double scalar, const std::string& x);
std::string binary_expr(ir::OpKind kind, double scalar, const std::string& a, const std::string& b);

// Emits the pass `pass` (op indices, head first; plan.pass_ending_at). A head that is not
// elementwise (reduce, rms_norm, an accumulator) has already written its own tile, or is a
// view (concat); the chain reads it from there. (A matmul head runs the chain itself, on
// its results in registers: emit_chain_store.)
void emit_elementwise_chain(const Emit& e, const std::vector<int>& pass);

// Statements applying the chain of `pass` after its non-elementwise head to `value`, the
// head's element at `idx`, and storing the pass end's element there.
void emit_chain_store(const Emit& e, const std::vector<int>& pass, const std::string& value,
                      const std::vector<std::string>& idx);

}  // namespace mj::codegen::cuda

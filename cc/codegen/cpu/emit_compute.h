#pragma once
// Code for the block ops that compute tiles: fused elementwise passes, matmul, reduce,
// rms_norm and concat, each on dense row-major float32 buffers with shapes as constants.
#include <string>
#include <vector>

#include "cc/codegen/cpu/code_writer.h"
#include "cc/codegen/cpu/kernel_plan.h"
#include "cc/ir/graph.h"

namespace mj::codegen {

// Emits one fused pass: `pass` lists op indices (plan.pass_ending_at), head first.
void emit_pass(CodeWriter& w, const BlockGraph& bg, const KernelPlan& plan,
               const std::vector<int>& pass);

// C[...] (+)= A[...] @ B[...] with batch dims broadcast like numpy; all three are buffer
// expressions of the given shapes.
void emit_batched_matmul(CodeWriter& w, const Shape& a_shape, const std::string& a,
                         const Shape& b_shape, const std::string& b, const Shape& c_shape,
                         const std::string& c, bool accumulate);

}  // namespace mj::codegen

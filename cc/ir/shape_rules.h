#pragma once
// Level-independent shape inference. Each rule takes the op's builder name and a description
// of each operand ("t3 [8, 128]") so that its IrError names the op, the tensors and the rule.
#include <string>

#include "cc/ir/graph.h"

namespace mj::ir {

[[noreturn]] void ir_fail(const std::string& op, const std::string& message);

// "t3 [8, 128]": how messages name a tensor of g (the id must be valid).
std::string tensor_desc(const Graph& g, int id);

// Rank 1..kMaxRank and every dim >= 1. `what` names the shape in the message.
void check_valid_shape(const std::string& op, const std::string& what, const Shape& s);

// numpy broadcasting: ranks right-aligned, a size-1 dim stretches.
Shape broadcast_shapes(const std::string& op, const std::string& a_desc, const Shape& a,
                       const std::string& b_desc, const Shape& b);

// [..., m, k] @ [..., k, n] -> [..., m, n], batch dims broadcast.
Shape matmul_shape(const std::string& op, const std::string& a_desc, const Shape& a,
                   const std::string& b_desc, const Shape& b);

// A python-style dim in [-rank, rank) made non-negative.
int normalize_dim(const std::string& op, const std::string& x_desc, int rank, int dim);

// The dim kept as size 1. `dim` must already be normalized.
Shape reduced_shape(const Shape& x, int dim);

// All dims equal except `dim` (normalized), which adds up.
Shape concat_shape(const std::string& op, const std::string& a_desc, const Shape& a,
                   const std::string& b_desc, const Shape& b, int dim);

}  // namespace mj::ir

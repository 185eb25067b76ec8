#pragma once
// Rebuilding a kernel graph, op for op, through the public builder API with new tensor
// shapes: the same ops, attributes, grids, for-loop ranges and maps, so every rule of the IR
// is checked again on the new shapes.
#include <functional>

#include "cc/ir/graph.h"

namespace mj::verify {

// The shape a tensor should have in the rebuilt graph. block_op is -1 for kernel tensors,
// else the index of the customized op whose block graph holds tensor t.
using ShapeOf = std::function<ir::Shape(int block_op, int t)>;

// Kernel inputs are created with shape_of's shapes and block inputs are declared from the
// rebuilt kernel tensors; every other shape follows from the builders and is checked against
// shape_of. Throws IrError when a builder rejects the new shapes or a shape differs.
ir::KernelGraph rebuild_with_shapes(const ir::KernelGraph& g, const ShapeOf& shape_of);

}  // namespace mj::verify

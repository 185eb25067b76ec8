#pragma once
// Thread level (docs/ir-semantics.md): which block ops run in one fused pass. A chain of
// elementwise ops joins its producer's group when it is that producer's only consumer and
// lives in the same phase, so `silu(acc) * other` after a matmul is one pass. The cost model
// and both code generators read the same groups.
#include <vector>

#include "cc/ir/graph.h"

namespace mj::ir {

// One entry per op of g: the fusion group id (the index of the group's first op), or -1 for
// ops that are not computation (inputs, outputs).
std::vector<int> thread_fusion_groups(const BlockGraph& g);

}  // namespace mj::ir

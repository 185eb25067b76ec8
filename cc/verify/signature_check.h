#pragma once
// The first thing verify_equivalent checks: two graphs can only be equivalent if they take
// the same inputs (count, shapes, dtypes) and produce the same number of outputs of the same
// shapes.
#include <string>

#include "cc/ir/graph.h"

namespace mj::verify {

// "" when the signatures agree, else a reason naming the first mismatch.
std::string signature_mismatch(const ir::KernelGraph& a, const ir::KernelGraph& b);

}  // namespace mj::verify

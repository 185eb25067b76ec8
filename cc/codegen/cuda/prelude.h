#pragma once
// The fixed device helpers every generated CUDA unit starts with: dtype conversions, the
// scalar formulas of cc/ir/elementwise.h, warp reductions, cp.async and mma.sync wrappers.
// Guarded by a macro, so several generated units can be concatenated into one file.
#include <string>

namespace mj::codegen::cuda {

const std::string& cuda_prelude();

}  // namespace mj::codegen::cuda

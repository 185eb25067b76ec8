#pragma once
// The fixed part of every generated CPU kernel: includes, float conversions, the activation
// formulas, the register-blocked matmul and the grid runner on XLA's thread pool. Guarded by
// a macro, so several kernels concatenated into one translation unit define it once.
#include <string>

namespace mj::codegen::cpu {

const std::string& cpu_prelude();

// The system headers the prelude includes, on their own: most of a kernel's compile time is
// parsing them, so the runtime precompiles this text once per machine and compiler.
const std::string& cpu_kernel_includes();

}  // namespace mj::codegen::cpu

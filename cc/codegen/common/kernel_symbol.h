#pragma once
// What both generators need to know about a kernel's exported symbol and about where an op
// runs relative to the for-loop.
#include <string>

#include "cc/ir/graph.h"

namespace mj::codegen::common {

// IrError naming `generator` ("generate_cpu_kernel") unless `symbol` is a C identifier: it
// names the FFI handler and the kernel's C++ namespace.
void check_symbol(const std::string& symbol, const char* generator);

// The canonical symbol of a block graph: prefix ("mj_cpu_") + its content hash, so equal
// graphs share one compiled kernel and one FFI target.
std::string kernel_symbol(const std::string& prefix, const ir::BlockGraph& bg);

// The phase of the tensor an op defines (an output op's own phase is meaningless).
inline ir::Phase phase_of(const ir::BlockGraph& bg, const ir::Op& op) {
  return bg.tensor(op.outputs.at(0)).phase;
}

}  // namespace mj::codegen::common

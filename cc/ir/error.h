#pragma once
#include <stdexcept>
#include <string>

namespace mj::ir {

// Every rule the IR enforces throws this, with a message that names the op, the tensor and
// the rule, so that no invalid graph can ever be built.
struct IrError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace mj::ir

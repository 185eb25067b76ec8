#pragma once
// Text both generators' FFI handlers are written with: the XLA FFI dtype of a storage dtype,
// and a shape as a comma-separated list (for the handlers' shape checks and messages).
#include <string>

#include "cc/ir/dtype.h"
#include "cc/ir/graph.h"

namespace mj::codegen::common {

std::string ffi_dtype(ir::DType d);         // "xla::ffi::DataType::F32", ...
std::string dims_list(const ir::Shape& s);  // "8, 4096"

}  // namespace mj::codegen::common

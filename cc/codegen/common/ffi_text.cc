#include "cc/codegen/common/ffi_text.h"

namespace mj::codegen::common {

using ir::DType;
using ir::Shape;

std::string ffi_dtype(DType d) {
  switch (d) {
    case DType::kBF16: return "xla::ffi::DataType::BF16";
    case DType::kF16: return "xla::ffi::DataType::F16";
    default: return "xla::ffi::DataType::F32";
  }
}

std::string dims_list(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out;
}

}  // namespace mj::codegen::common

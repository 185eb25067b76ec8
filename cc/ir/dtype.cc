#include "cc/ir/dtype.h"

#include "cc/ir/error.h"

namespace mj::ir {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kF32: return "float32";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
  }
  throw IrError("dtype_name: invalid DType value " + std::to_string(int(d)));
}

DType parse_dtype(std::string_view name) {
  if (name == "float32") return DType::kF32;
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float16") return DType::kF16;
  throw IrError("parse_dtype: unknown dtype '" + std::string(name) +
                "' (expected float32, bfloat16 or float16)");
}

int dtype_bytes(DType d) {
  switch (d) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
  }
  throw IrError("dtype_bytes: invalid DType value " + std::to_string(int(d)));
}

}  // namespace mj::ir

#pragma once
// Storage dtypes. Kernels compute and accumulate in float32 and cast on store.
#include <cstdint>
#include <string>
#include <string_view>

namespace mj::ir {

enum class DType : uint8_t { kF32, kBF16, kF16 };

const char* dtype_name(DType d);           // "float32", "bfloat16", "float16"
DType parse_dtype(std::string_view name);  // throws IrError naming the bad string
int dtype_bytes(DType d);

}  // namespace mj::ir

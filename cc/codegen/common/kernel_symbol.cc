#include "cc/codegen/common/kernel_symbol.h"

#include <cctype>

#include "cc/ir/error.h"
#include "cc/ir/hash.h"

namespace mj::codegen::common {

void check_symbol(const std::string& symbol, const char* generator) {
  bool ok = !symbol.empty() && !std::isdigit(static_cast<unsigned char>(symbol[0]));
  for (char c : symbol) ok &= std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  if (!ok) {
    throw ir::IrError(std::string(generator) + ": symbol '" + symbol +
                      "' is not a C identifier (letters, digits and '_', not starting with a "
                      "digit)");
  }
}

std::string kernel_symbol(const std::string& prefix, const ir::BlockGraph& bg) {
  return prefix + ir::block_graph_hash(bg);
}

}  // namespace mj::codegen::common

#pragma once
// Canonical content hashes: independent of the order in which independent ops were added
// (each tensor hashes its op and its operands' hashes; inputs hash by position), so two
// builds of the same DAG agree. 128 bits as 32 hex chars.
#include <string>

#include "cc/ir/graph.h"

namespace mj::ir {

std::string graph_hash(const KernelGraph& g);
std::string block_graph_hash(const BlockGraph& g);

}  // namespace mj::ir

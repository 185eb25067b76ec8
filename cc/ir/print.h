#pragma once
// Readable text of all levels: the kernel graph, each block graph nested under its
// customized op, with imaps/fmaps/omaps, phases and thread-level fusion groups.
#include <string>

#include "cc/ir/graph.h"

namespace mj::ir {

std::string to_string(const KernelGraph& g);
std::string to_string(const BlockGraph& g, int indent = 0);

}  // namespace mj::ir

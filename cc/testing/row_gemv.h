#pragma once
// A GEMV that reads its weight a piece of each row per loop step or whole rows, for the tests
// of KernelWork::cut_row_bytes and of the search's order of tied candidates.
#include <memory>

#include "cc/ir/graph.h"

namespace mj::testing {

// w[256, 64] @ x[64, 1] over 4 blocks of w's rows, the k of 64 walked in `forloop` steps
// (with a loop, every step reads a piece of each of the block's rows of w).
std::shared_ptr<ir::BlockGraph> row_gemv_block(int forloop);

// The kernel graph of one customized op running row_gemv_block(forloop).
std::shared_ptr<const ir::KernelGraph> row_gemv(int forloop);

}  // namespace mj::testing

#pragma once
// Kernel level of the enumeration (search.h): from the target's inputs, append a
// predefined op or open a block graph (block_enumerator.h), depth-first, in canonical order
// (op_key.h). Whenever the dangling tensors have the target's output shapes (and, with
// pruning, its outputs' abstract expressions), the graph is a candidate: it is verified
// against the target and, if equivalent, kept.
#include <vector>

#include "cc/search/partitions.h"
#include "cc/search/search_state.h"

namespace mj::search {

// The target's inputs, nothing else; expressions in the worker's pool.
KernelState initial_kernel_state(const SearchShared& shared, Worker& worker);

// One step from a kernel state. The first level of these is the search's unit of parallel
// work: each is a task that builds its subtree.
struct KernelMove {
  bool opens_block_graph = false;
  ir::Op op;                // a predefined op (when !opens_block_graph)
  std::vector<int> inputs;  // the block graph's kernel inputs, ascending
  BlockLayout layout;
};

std::vector<KernelMove> kernel_moves(const KernelState& s, const SearchShared& shared);

// Applies the move to s and explores everything below it.
void run_kernel_move(const KernelState& s, const KernelMove& m, SearchShared& shared,
                     Worker& worker);

// Counts s as explored, checks it as a candidate, and explores its children.
void expand_kernel(const KernelState& s, SearchShared& shared, Worker& worker);

}  // namespace mj::search

#pragma once
// Block level of the enumeration (search.h): a block graph is opened on chosen kernel
// tensors with a layout (partitions.h), then grows one block op or accumulator at a time in
// canonical order, each new tensor checked for shape, phase, index classes and abstract
// expression, and is closed by storing exactly its dangling tensors. Each closed graph
// becomes a customized op of a child kernel state.
#include <functional>
#include <vector>

#include "cc/search/partitions.h"
#include "cc/search/search_state.h"

namespace mj::search {

// Depth-first over every block graph on `inputs` (kernel tensor ids of parent, ascending)
// with `layout`; calls on_close for each child kernel state that appends one of them.
void enumerate_block_graphs(const KernelState& parent, const std::vector<int>& inputs,
                            const BlockLayout& layout, SearchShared& shared, Worker& worker,
                            const std::function<void(KernelState&&)>& on_close);

}  // namespace mj::search

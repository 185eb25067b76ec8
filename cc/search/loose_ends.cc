#include "cc/search/loose_ends.h"

#include <algorithm>

namespace mj::search {

using ir::OpKind;

namespace {

// The most loose ends one kernel op can tie off, net.
int tie_off_per_kernel_op(const SearchConfig& c, bool block_graphs_left) {
  return block_graphs_left ? std::max(1, c.max_block_inputs - 1) : 1;
}

}  // namespace

int kernel_loose_ends(const KernelState& s, const std::vector<int>& consumed_next) {
  int n = 0;
  for (int t = 0; t < int(s.graph.tensors().size()); ++t) {
    if (s.facts[t].consumers > 0) continue;
    if (s.graph.ops()[s.graph.tensor(t).producer].kind == OpKind::kInput) continue;
    if (std::find(consumed_next.begin(), consumed_next.end(), t) != consumed_next.end()) continue;
    ++n;
  }
  return n;
}

bool kernel_state_viable(const KernelState& s, const SearchShared& shared) {
  const SearchConfig& c = shared.config;
  const int ops_left = c.max_kernel_ops - s.ops;
  const int per_op = tie_off_per_kernel_op(c, s.block_graphs < c.max_block_graphs);
  return kernel_loose_ends(s) - ops_left * per_op <= int(shared.target.output_ids().size());
}

int block_output_cap(const KernelState& parent, const std::vector<int>& inputs,
                     const SearchShared& shared) {
  const SearchConfig& c = shared.config;
  const int ops_left = c.max_kernel_ops - parent.ops - 1;
  const int per_op = tie_off_per_kernel_op(c, parent.block_graphs + 1 < c.max_block_graphs);
  const int cap = int(shared.target.output_ids().size()) + ops_left * per_op -
                  kernel_loose_ends(parent, inputs);
  return std::min(cap, c.max_block_outputs);
}

}  // namespace mj::search

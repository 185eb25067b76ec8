#pragma once
// A bound that cuts branches which can no longer become a candidate. A loose end is a
// result nothing consumes yet (or a block input nothing reads). A candidate has exactly its
// outputs as loose ends, and one op can tie off only so many: a binary op consumes two and
// leaves one (net one), a customized op with i inputs consumes i and leaves at least one
// (net i - 1). A state with more loose ends than the remaining ops can tie off, beyond the
// outputs it may keep, is dead.
#include <vector>

#include "cc/search/search_state.h"

namespace mj::search {

// Computed kernel tensors of s that nothing consumes, not counting `consumed_next`.
int kernel_loose_ends(const KernelState& s, const std::vector<int>& consumed_next = {});

// Whether s can still reach the target's output count within the kernel-op budget.
bool kernel_state_viable(const KernelState& s, const SearchShared& shared);

// How many outputs a block graph opened on `inputs` from `parent` may store and still lead
// to a candidate (< 1: none).
int block_output_cap(const KernelState& parent, const std::vector<int>& inputs,
                     const SearchShared& shared);

// Whether a block state with these loose ends can close with at most `cap` outputs.
inline bool block_state_viable(int dangling, int unused_inputs, int ops_left, int cap) {
  return dangling + unused_inputs - ops_left <= cap;
}

}  // namespace mj::search

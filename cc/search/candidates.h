#pragma once
// Complete candidates (search.h): a kernel state whose loose ends have the target's
// output shapes (and, with pruning, the target outputs' abstract expressions) is marked with
// those outputs in every matching order, deduplicated by canonical hash, and proved
// equivalent with the finite-field verifier (cc/verify) before it is kept. Abstract
// expressions only choose what to verify; they never accept anything.
#include <memory>
#include <string>

#include "cc/search/search_state.h"

namespace mj::search {

void check_candidate(const KernelState& s, SearchShared& shared, Worker& worker);

// Proves one claimed candidate equivalent to the target and keeps it when it is; whether
// it was kept.
bool verify_candidate(std::shared_ptr<const ir::KernelGraph> candidate, std::string hash,
                      SearchShared& shared);

}  // namespace mj::search

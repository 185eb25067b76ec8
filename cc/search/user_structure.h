#pragma once
// The grids and maps a caller fixes (SearchConfig::grids, imaps, omaps, fmaps): their
// checks, and the filters that keep only the layouts and omaps they allow. The filters run
// where the candidates are generated (partitions.cc, block_enumerator.cc), so a restricted
// search never builds what it would throw away, and everything it returns is still built
// and verified as any other candidate: the caller's structure narrows the search, it is
// never trusted to be right.
#include <string>
#include <vector>

#include "cc/ir/graph.h"
#include "cc/search/config.h"
#include "cc/search/partitions.h"

namespace mj::search {

// What is wrong with the fields on their own ("" when nothing): grid sizes below 1, map
// entries below -1, a map splitting one dim on two axes. What a graph must also allow (a
// dim in range, a size the grid divides) is the Python SearchConfig's check at search
// start; here a map no tensor can take is only never chosen.
std::string bad_user_structure(const SearchConfig& config);

// Whether every input's imap and fmap in `layout` is among the config's, where given.
bool user_layout_allowed(const SearchConfig& config, const BlockLayout& layout);

// `omaps` less those the config does not list (all of them when it lists none).
std::vector<ir::Dim3> user_allowed_omaps(const SearchConfig& config, std::vector<ir::Dim3> omaps);

}  // namespace mj::search

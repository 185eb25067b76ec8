#pragma once
// The μGraph search: given an input kernel graph, enumerate kernel graphs that
// may compute the same outputs, most of them fusing work into graph-defined (block-graph)
// operators; prune every partial graph whose tensors are not subexpressions of the target
// (cc/absexpr); prove every complete candidate equivalent with the finite-field verifier
// (cc/verify); and rank the survivors, best first (cc/cost).
//
// The parts, one concept per file: kernel_enumerator (kernel-level steps), block_enumerator
// (block-level steps), partitions (grids, imaps, fmaps, for-loop ranges, omaps from shapes),
// index_classes (which dims index the same thing, stacks of partial results), op_proposals
// and op_key (what may be appended next, in canonical order), block_op_rules, loose_ends,
// stabilizers (where a softmax max may be read) and recomputation (no second copy of a
// value) for structural pruning, pruner (abstract-expression pruning with cc/absexpr),
// candidates (verification), result_set (dedup and order), thread_pool.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cc/ir/graph.h"
#include "cc/search/config.h"

namespace mj::search {

struct SearchStats {
  int64_t states_explored = 0;  // partial graphs built (kernel and block level)
  int64_t states_pruned = 0;    // proposed ops rejected by the abstract-expression check
  int64_t candidates_verified = 0;
  int64_t candidates_accepted = 0;
  int64_t candidates_unverified = 0;  // found but never verified (max_verified)
  double seconds_enumerate = 0;       // wall time of the enumeration, verification included
  double seconds_verify = 0;          // summed over threads
  double seconds_rank = 0;
  double seconds_saturate = 0;  // the target's e-graph, once
  std::string to_string() const;
};

struct SearchProgress {
  int64_t tasks_done = 0, tasks_total = 0;
  int64_t states_explored = 0;
  int64_t candidates_accepted = 0;
  double seconds = 0;
  // The ranking's cost of the best candidate accepted so far and of the target itself
  // (infinity when unknown): the best a stop now would return, against the original.
  double best_cost = std::numeric_limits<double>::infinity();
  double target_cost = std::numeric_limits<double>::infinity();
};

struct SearchResult {
  // Verified equivalent to the target, best first by the cost model, then canonical hash.
  // The target itself (unfused) is always among them when the search ran.
  std::vector<std::shared_ptr<const ir::KernelGraph>> candidates;
  std::vector<double> costs;  // parallel to candidates
  SearchStats stats;
  // Why the search stopped early or found nothing; "" when it ran to completion.
  std::string reason;
};

// Returns false from `progress` to stop (Ctrl-C); the result then holds what was found.
// Never throws for a bad target: the result is empty and `reason` says why.
SearchResult search(const ir::KernelGraph& target, const SearchConfig& config,
                    const std::function<bool(const SearchProgress&)>& progress = {});

}  // namespace mj::search

#pragma once
// The state the enumerators carry down the search tree, and what one search shares across
// its threads. Graph builders cannot remove ops, so a child state is a copy of its parent
// plus one op: graphs here are small, and copies keep every branch independent.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cc/absexpr/expr.h"
#include "cc/ir/graph.h"
#include "cc/search/config.h"
#include "cc/search/index_classes.h"
#include "cc/search/op_key.h"
#include "cc/search/pruner.h"
#include "cc/search/result_set.h"

namespace mj::search {

// What the search knows about a tensor beyond the IR.
struct TensorFacts {
  absexpr::ExprId expr = 0;        // abstract expression in the worker's pool (pruning on only)
  DimClasses classes;              // index class per dim
  int consumers = 0;               // ops reading it, so dangling results can be found
  bool stabilizer = false;         // a max, or a tile or store of one (stabilizers.h)
  absexpr::ExprId stabilizes = 0;  // for a stabilizer: the expression of what the max was taken of
  bool bounded_above = false;  // x - max(x), or a tile or store of it: exp of it cannot overflow
};

struct KernelState {
  ir::KernelGraph graph;
  std::vector<TensorFacts> facts;  // per tensor
  ClassTable table;
  std::optional<OpKey> last_key;
  int ops = 0;
  int block_graphs = 0;
};

struct BlockState {
  std::shared_ptr<ir::BlockGraph> graph;  // copied before each append
  std::vector<TensorFacts> facts;
  ClassTable table;
  std::optional<OpKey> last_key;
  int ops = 0;
};

// Read by every thread; the counters and the stop flag are the only shared writes.
struct SearchShared {
  const ir::KernelGraph& target;
  const SearchConfig& config;
  TargetClasses classes;
  std::vector<int> output_classes;   // index classes the target's outputs have
  std::vector<double> scalars;       // the target's constants (eps, scales), sorted
  std::vector<double> select_fills;  // the fills of the target's selects, sorted
  bool target_has_max = false;       // whether max ops may be proposed (op_proposals.h)
  // Whether the target takes exp of anything not bounded above (cc/verify/float_safety.h);
  // when not, a candidate may only take exp of x - max(x) (stabilizers.h).
  bool target_has_unbounded_exp = false;
  const PruningTarget* pruning = nullptr;
  std::chrono::steady_clock::time_point deadline;
  ResultSet results;
  // The ranking's cost (SearchConfig::cost, or the cost model on config.target): an accepted
  // candidate's, for the progress reports' best so far.
  std::function<double(const ir::KernelGraph&)> cost;

  std::atomic<bool> stop{false};
  std::atomic<bool> budget_spent{false};
  std::atomic<int64_t> explored{0}, pruned{0}, verified{0}, accepted{0}, verify_ns{0};

  SearchShared(const ir::KernelGraph& t, const SearchConfig& c) : target(t), config(c) {}
};

// One per thread: its own expression pool and memo.
struct Worker {
  explicit Worker(const PruningTarget* t) : pruner(t) {}
  Pruner pruner;
  int calls_since_clock = 0;
};

// True when the search must unwind: stopped by the caller or out of time. Reads the clock
// only every few calls: it is asked once per proposed op.
bool should_stop(SearchShared& shared, Worker& worker);

}  // namespace mj::search

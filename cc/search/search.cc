#include "cc/search/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <thread>

#include "cc/cost/estimate.h"
#include "cc/ir/hash.h"
#include "cc/search/candidates.h"
#include "cc/search/kernel_enumerator.h"
#include "cc/search/op_key.h"
#include "cc/search/thread_pool.h"
#include "cc/search/user_structure.h"
#include "cc/verify/float_safety.h"

namespace mj::search {

using absexpr::SaturationLimits;
using cost::check_target;
using cost::estimate;
using ir::graph_hash;
using ir::KernelGraph;
using ir::Op;
using ir::OpKind;
using ir::ReduceKind;

std::string SearchStats::to_string() const {
  char buf[480];
  std::snprintf(buf, sizeof buf,
                "explored %lld states, pruned %lld, verified %lld candidates, accepted %lld, "
                "left %lld unverified; saturate %.3f s, enumerate %.3f s (verify %.3f s cpu), "
                "rank %.3f s",
                (long long)states_explored, (long long)states_pruned,
                (long long)candidates_verified, (long long)candidates_accepted,
                (long long)candidates_unverified, seconds_saturate, seconds_enumerate,
                seconds_verify, seconds_rank);
  return buf;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Why the search cannot take this target, or "".
std::string unsupported(const KernelGraph& target) {
  if (target.output_ids().empty()) return "the target has no outputs";
  if (target.input_ids().empty()) return "the target has no inputs";
  for (const Op& op : target.ops()) {
    if (op.kind == OpKind::kCustomized) {
      return "the target already has a customized op; the search takes predefined ops only";
    }
  }
  return "";
}

// Why the config cannot be searched with, or "".
std::string bad_config(const SearchConfig& c) {
  if (c.preset != "mlp" && c.preset != "attention" && c.preset != "lora") {
    return "unknown preset '" + c.preset + "' (mlp, attention, lora)";
  }
  if (!(c.time_budget_s > 0)) return "time_budget_s must be positive";
  if (c.threads < 0) return "threads must be >= 0";
  if (c.max_kernel_ops < 1 || c.max_block_ops < 1 || c.max_block_graphs < 0 ||
      c.max_block_outputs < 1 || c.max_grid_axes < 0 || c.max_grids < 1 ||
      c.max_forloop_ranges < 0 || c.max_verified < 0) {
    return "search limits must be positive";
  }
  if (c.max_block_inputs < 1 || c.max_block_inputs > kMaxKeyInputs) {
    return "max_block_inputs must be in [1, " + std::to_string(kMaxKeyInputs) + "]";
  }
  if (std::string why = bad_user_structure(c); !why.empty()) return why;
  try {
    check_target(c.target);
  } catch (const std::exception& e) {
    return std::string("bad target: ") + e.what();
  }
  return "";
}

std::vector<double> target_scalars(const KernelGraph& target) {
  std::set<double> s;
  for (const Op& op : target.ops()) {
    if (ir::has_scalar(op.kind) && op.kind != OpKind::kSelect) s.insert(op.scalar);
  }
  return {s.begin(), s.end()};
}

std::vector<double> target_select_fills(const KernelGraph& target) {
  std::set<double> s;
  for (const Op& op : target.ops()) {
    if (op.kind == OpKind::kSelect) s.insert(op.scalar);
  }
  return {s.begin(), s.end()};
}

// max_verified: the held candidates, best first, are verified `threads` at a time (never
// more at once than are still needed, so the accepted set is the first N accepted in rank
// order whatever the thread count) until N are accepted. Returns how many were left.
int64_t verify_best_held(SearchShared& shared,
                         const std::function<double(const KernelGraph&)>& cost, int threads,
                         std::string& error) {
  std::vector<RankedCandidate> held = shared.results.take_held(cost);
  size_t next = 0;
  int64_t accepted = 0;
  std::mutex error_mu;
  // A spent time budget still verifies the best few (what was found is what is returned);
  // only the caller's stop skips them.
  auto stopped_by_caller = [&] { return shared.stop.load() && !shared.budget_spent.load(); };
  while (next < held.size() && accepted < shared.config.max_verified && error.empty() &&
         !stopped_by_caller()) {
    if (!std::isfinite(held[next].cost)) break;  // sorted: the rest cannot run either
    const size_t n = std::min(
        {held.size() - next, size_t(threads), size_t(shared.config.max_verified - accepted)});
    std::vector<char> kept(n, 0);
    run_tasks(
        threads, int64_t(n),
        [&](int64_t i, int) {
          try {
            RankedCandidate& c = held[next + size_t(i)];
            kept[size_t(i)] = verify_candidate(c.graph, c.hash, shared);
          } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (error.empty()) error = e.what();
          }
        },
        [](int64_t) {});
    for (char k : kept) accepted += k;
    next += n;
  }
  return int64_t(held.size() - next);
}

}  // namespace

SearchResult search(const KernelGraph& target, const SearchConfig& config,
                    const std::function<bool(const SearchProgress&)>& progress) {
  SearchResult result;
  const Clock::time_point start = Clock::now();
  std::string why = bad_config(config);
  if (why.empty()) why = unsupported(target);
  if (!why.empty()) {
    result.reason = why;
    return result;
  }
  SearchShared shared(target, config);
  std::function<double(const KernelGraph&)> cost = config.cost;
  if (!cost) cost = [&](const KernelGraph& g) { return estimate(g, config.target).seconds; };
  shared.cost = cost;
  shared.deadline = start + std::chrono::microseconds(int64_t(config.time_budget_s * 1e6));
  std::unique_ptr<PruningTarget> pruning;
  try {
    shared.classes = target_classes(target);
    std::set<int> outs;
    for (const DimClasses& c : shared.classes.outputs) outs.insert(c.begin(), c.end());
    outs.erase(kUnitClass);
    shared.output_classes.assign(outs.begin(), outs.end());
    shared.scalars = target_scalars(target);
    shared.select_fills = target_select_fills(target);
    for (const Op& op : target.ops()) {
      shared.target_has_max |= op.kind == OpKind::kReduce && op.reduce == ReduceKind::kMax;
    }
    shared.target_has_unbounded_exp = verify::has_unbounded_exp(target, config.seed);
    if (config.pruning) {
      SaturationLimits limits;
      limits.max_seconds = std::min(limits.max_seconds, config.time_budget_s / 4);
      pruning = make_pruning_target(target, limits);
      shared.pruning = pruning.get();
    }
  } catch (const std::exception& e) {
    result.reason = std::string("cannot search this target: ") + e.what();
    return result;
  }
  result.stats.seconds_saturate = seconds_since(start);

  const int threads =
      config.threads > 0 ? config.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::unique_ptr<Worker>> workers;
  for (int w = 0; w < threads; ++w) workers.push_back(std::make_unique<Worker>(shared.pruning));

  // The original's cost, for the reports (a target the model cannot price reports none).
  double target_cost = std::numeric_limits<double>::infinity();
  try {
    target_cost = cost(target);
  } catch (const std::exception&) {
  }
  // The root's children are the tasks. Moves name tensors by id, not by expression, so the
  // list made with worker 0's pool is valid in every worker.
  const KernelState root = initial_kernel_state(shared, *workers[0]);
  const std::vector<KernelMove> moves = kernel_moves(root, shared);
  std::mutex error_mu;
  std::string error;
  bool stopped_by_caller = false;
  const Clock::time_point enumerate_start = Clock::now();
  // MJ_SEARCH_PROFILE=1 prints each root task's wall time and states (approximate with
  // more than one thread) to stderr.
  const char* profile_env = std::getenv("MJ_SEARCH_PROFILE");
  const bool profile = profile_env && *profile_env && std::string(profile_env) != "0";
  run_tasks(
      threads, int64_t(moves.size()),
      [&](int64_t i, int w) {
        try {
          Worker& worker = *workers[w];
          const Clock::time_point t0 = Clock::now();
          const int64_t explored0 = shared.explored.load();
          run_kernel_move(initial_kernel_state(shared, worker), moves[i], shared, worker);
          if (profile) {
            const KernelMove& m = moves[i];
            std::string what;
            if (m.opens_block_graph) {
              what = "block inputs";
              for (int t : m.inputs) what += " " + std::to_string(t);
              what += " grid " + std::to_string(m.layout.grid[0]) + "x" +
                      std::to_string(m.layout.grid[1]) + "x" + std::to_string(m.layout.grid[2]) +
                      " loop " + std::to_string(m.layout.forloop_range);
            } else {
              what = "op " + std::to_string(int(m.op.kind));
            }
            std::fprintf(stderr, "[search profile] task %lld/%zu %s: %.3f s, ~%lld states\n",
                         (long long)i, moves.size(), what.c_str(), seconds_since(t0),
                         (long long)(shared.explored.load() - explored0));
          }
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (error.empty()) error = e.what();
          shared.stop.store(true);
        }
      },
      [&](int64_t done) {
        if (!progress) return;
        SearchProgress p;
        p.tasks_done = done;
        p.tasks_total = int64_t(moves.size());
        p.states_explored = shared.explored.load();
        p.candidates_accepted = shared.accepted.load();
        p.seconds = seconds_since(start);
        p.best_cost = shared.results.best_cost();
        p.target_cost = target_cost;
        if (!progress(p) && !shared.stop.exchange(true)) stopped_by_caller = true;
      });
  if (config.max_verified > 0 && error.empty()) {
    try {
      result.stats.candidates_unverified = verify_best_held(shared, cost, threads, error);
    } catch (const std::exception& e) {
      error = std::string("cannot rank candidates for verification: ") + e.what();
    }
  }
  result.stats.seconds_enumerate = seconds_since(enumerate_start);

  // The target itself is always a candidate: the result is never worse than the input.
  auto reference = std::make_shared<const KernelGraph>(target);
  const std::string reference_hash = graph_hash(target);
  if (shared.results.claim(reference_hash)) shared.results.accept(reference, reference_hash);

  const Clock::time_point rank_start = Clock::now();
  try {
    for (RankedCandidate& c : shared.results.ranked(cost)) {
      // The cost model says infinite when a block graph cannot run on the target at all
      // (e.g. more shared memory than a GPU block may have): not a candidate there.
      if (!std::isfinite(c.cost)) continue;
      result.candidates.push_back(std::move(c.graph));
      result.costs.push_back(c.cost);
    }
  } catch (const std::exception& e) {
    result.candidates.clear();
    result.costs.clear();
    result.reason = std::string("cannot rank candidates: ") + e.what();
  }
  result.stats.seconds_rank = seconds_since(rank_start);

  result.stats.states_explored = shared.explored.load();
  result.stats.states_pruned = shared.pruned.load();
  result.stats.candidates_verified = shared.verified.load();
  result.stats.candidates_accepted = shared.accepted.load();
  result.stats.seconds_verify = double(shared.verify_ns.load()) * 1e-9;
  if (!result.reason.empty()) return result;
  if (!error.empty()) {
    result.reason = "search failed: " + error;
  } else if (stopped_by_caller) {
    result.reason = "stopped";
  } else if (shared.budget_spent.load()) {
    result.reason = "time budget spent";
  }
  return result;
}

}  // namespace mj::search

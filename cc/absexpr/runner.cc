#include "cc/absexpr/runner.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>

namespace mj::absexpr {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kSaturated: return "saturated";
    case StopReason::kNodeLimit: return "node limit";
    case StopReason::kTimeLimit: return "time limit";
    case StopReason::kIterationLimit: return "iteration limit";
  }
  return "invalid stop reason";
}

std::string SaturationReport::to_string() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s after %d iterations: %zu nodes, %zu classes, %.3f ms",
                stop_reason_name(stop), iterations, nodes, classes, seconds * 1e3);
  return buf;
}

namespace {

// For each class id, how many parent steps it is above a class whose nodes changed after
// `since` (INT_MAX beyond max_steps). A match whose pattern spans d levels of classes can only
// be new at a root within d - 1 steps of a change: everything else was matched before.
std::vector<int> steps_above_change(const EGraph& g, const std::vector<ClassId>& classes,
                                    uint64_t since, int max_steps) {
  const size_t bound = classes.empty() ? 0 : classes.back() + 1;
  std::vector<int> steps(bound, INT_MAX);
  std::vector<ClassId> frontier;
  for (ClassId c : classes) {
    if (g.changed_at(c) > since) steps[c] = 0, frontier.push_back(c);
  }
  for (int level = 1; level <= max_steps && !frontier.empty(); ++level) {
    std::vector<ClassId> next;
    for (ClassId c : frontier) {
      for (const auto& parent : g.eclass(c).parents) {
        const ClassId p = g.find(parent.second);
        if (steps[p] > level) steps[p] = level, next.push_back(p);
      }
    }
    frontier.swap(next);
  }
  return steps;
}

}  // namespace

SaturationReport saturate(EGraph& g, const std::vector<Rewrite>& rules,
                          const SaturationLimits& limits) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  struct Backoff {
    int times_banned = 0;
    int banned_until = 0;                  // first iteration the rule may run again
    bool searched_last_iteration = false;  // else its next search must cover every class
  };
  std::vector<Backoff> backoff(rules.size());
  SaturationReport report;
  report.applied.assign(rules.size(), 0);

  int max_depth = 1;
  for (const Rewrite& r : rules) max_depth = std::max(max_depth, r.lhs().depth() - 1);
  uint64_t previous_search_version = 0;

  g.rebuild();
  auto finish = [&](StopReason why) {
    g.rebuild();
    report.stop = why;
    report.nodes = g.num_nodes();
    report.classes = g.num_classes();
    report.seconds = elapsed();
    return report;
  };

  for (int iter = 0;; ++iter) {
    if (iter >= limits.max_iterations) return finish(StopReason::kIterationLimit);
    if (g.num_nodes() > limits.max_nodes) return finish(StopReason::kNodeLimit);
    if (elapsed() > limits.max_seconds) return finish(StopReason::kTimeLimit);
    const uint64_t version_before = g.version();
    bool held_back = false;  // a banned or skipped rule might still change the graph

    // Matches found in an earlier iteration were applied then, and their effect persists, so
    // each rule searches only near classes that changed since its last search.
    const std::vector<ClassId> all_classes = g.class_ids();
    std::vector<int> steps;
    if (iter > 0) steps = steps_above_change(g, all_classes, previous_search_version, max_depth);
    previous_search_version = version_before;

    // Search everything on the clean graph first, then apply: matches stay valid because
    // applying only adds nodes and merges classes.
    std::vector<std::vector<Match>> matches(rules.size());
    for (size_t r = 0; r < rules.size(); ++r) {
      Backoff& b = backoff[r];
      const bool full_search = iter == 0 || !b.searched_last_iteration;
      b.searched_last_iteration = false;
      if (iter < b.banned_until) {
        held_back = true;
        continue;
      }
      std::vector<ClassId> roots;
      if (full_search) {
        roots = all_classes;
      } else {
        const int reach = rules[r].lhs().depth() - 1;
        for (ClassId c : all_classes) {
          if (steps[c] <= reach) roots.push_back(c);
        }
      }
      const int doublings = std::min(b.times_banned, 20);  // no shift past the type's width
      const size_t threshold =
          limits.rule_match_limit == 0 ? SIZE_MAX - 1 : limits.rule_match_limit << doublings;
      matches[r] = rules[r].search(g, roots, threshold + 1);
      if (matches[r].size() > threshold) {
        matches[r].clear();
        ++b.times_banned;
        b.banned_until = iter + 1 + (limits.ban_iterations << std::min(b.times_banned, 20));
        held_back = true;
      } else {
        b.searched_last_iteration = true;
      }
      if (elapsed() > limits.max_seconds) return finish(StopReason::kTimeLimit);
    }

    size_t since_check = 0;
    for (size_t r = 0; r < rules.size(); ++r) {
      for (const Match& m : matches[r]) {
        if (rules[r].apply(g, m)) ++report.applied[r];
        if (++since_check == 64) {
          since_check = 0;
          if (g.num_nodes() > limits.max_nodes) return finish(StopReason::kNodeLimit);
          if (elapsed() > limits.max_seconds) return finish(StopReason::kTimeLimit);
        }
      }
    }
    g.rebuild();
    report.iterations = iter + 1;

    if (g.version() == version_before) {
      if (!held_back) return finish(StopReason::kSaturated);
      // Only banned rules are left to try: lift the bans now rather than idle (egg does too).
      for (Backoff& b : backoff) b.banned_until = 0;
    }
  }
}

}  // namespace mj::absexpr

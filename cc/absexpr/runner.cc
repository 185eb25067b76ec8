#include "cc/absexpr/runner.h"

#include <chrono>
#include <cstdio>

namespace mj {

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

SaturationReport saturate(EGraph& g, const std::vector<Rewrite>& rules,
                          const SaturationLimits& limits) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  struct Backoff {
    int times_banned = 0;
    int banned_until = 0;  // first iteration the rule may run again
  };
  std::vector<Backoff> backoff(rules.size());
  SaturationReport report;
  report.applied.assign(rules.size(), 0);

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

    // Search everything on the clean graph first, then apply: matches stay valid because
    // applying only adds nodes and merges classes.
    std::vector<std::vector<Match>> matches(rules.size());
    for (size_t r = 0; r < rules.size(); ++r) {
      if (iter < backoff[r].banned_until) {
        held_back = true;
        continue;
      }
      if (limits.rule_match_limit == 0) {
        matches[r] = rules[r].search(g);
      } else {
        const size_t threshold = limits.rule_match_limit << backoff[r].times_banned;
        matches[r] = rules[r].search(g, threshold + 1);
        if (matches[r].size() > threshold) {
          matches[r].clear();
          ++backoff[r].times_banned;
          backoff[r].banned_until = iter + 1 + (limits.ban_iterations << backoff[r].times_banned);
          held_back = true;
        }
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

}  // namespace mj

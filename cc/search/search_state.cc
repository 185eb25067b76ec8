#include "cc/search/search_state.h"

namespace mj::search {

bool should_stop(SearchShared& shared, Worker& worker) {
  if (shared.stop.load(std::memory_order_relaxed)) return true;
  if (++worker.calls_since_clock < 256) return false;
  worker.calls_since_clock = 0;
  if (std::chrono::steady_clock::now() >= shared.deadline) {
    shared.budget_spent.store(true, std::memory_order_relaxed);
    shared.stop.store(true, std::memory_order_relaxed);
    return true;
  }
  return false;
}

}  // namespace mj::search

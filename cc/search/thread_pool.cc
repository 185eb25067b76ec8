#include "cc/search/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace mj::search {

void run_tasks(int threads, int64_t num_tasks,
               const std::function<void(int64_t task, int worker)>& task,
               const std::function<void(int64_t tasks_done)>& poll, int poll_ms) {
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mu;
  std::condition_variable finished;
  int running = threads;
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w) {
    pool.emplace_back([&, w] {
      for (int64_t i; (i = next.fetch_add(1)) < num_tasks;) {
        task(i, w);
        done.fetch_add(1);
      }
      std::lock_guard<std::mutex> lock(mu);
      if (--running == 0) finished.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      finished.wait_for(lock, std::chrono::milliseconds(poll_ms));
      lock.unlock();
      if (poll) poll(done.load());
      lock.lock();
    }
  }
  for (std::thread& t : pool) t.join();
  if (poll) poll(done.load());
}

}  // namespace mj::search

#pragma once
// A fixed set of worker threads that pull task indices from a shared counter until all are
// taken: the search tree's top-level moves are independent, so no task ever waits on
// another. The calling thread polls while it waits (progress reports, Ctrl-C).
#include <cstdint>
#include <functional>

namespace mj::search {

// Runs task(i, worker) for i in [0, num_tasks) on `threads` workers (worker in [0, threads)).
// While they run, calls poll(tasks_done) about every poll_ms from the calling thread; a
// false return is passed on by the caller's own stop flag, which tasks must check: this
// function always waits for every started task to return.
void run_tasks(int threads, int64_t num_tasks,
               const std::function<void(int64_t task, int worker)>& task,
               const std::function<void(int64_t tasks_done)>& poll, int poll_ms = 50);

}  // namespace mj::search

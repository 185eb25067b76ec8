// The μGraph search: its config and target presets as writable records, its result, stats
// and progress reports as read-only ones. The search runs with the GIL released; the
// progress callback takes it back to check for Ctrl-C and to call the Python hook.
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "cc/cost/target.h"
#include "cc/python/bindings.h"
#include "cc/search/op_key.h"
#include "cc/search/search.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mj::python {

using cost::Target;
using ir::KernelGraph;
using search::kMaxKeyInputs;
using search::search;
using search::SearchConfig;
using search::SearchProgress;
using search::SearchResult;
using search::SearchStats;

namespace {

void bind_target(nb::module_& m) {
  nb::class_<Target>(m, "Target")
      .def_ro("name", &Target::name)
      .def_static("cpu_host", [] { return Target::cpu_host(); })
      .def_static("a100", &Target::a100)
      .def_static("h100", &Target::h100)
      .def_static("h200", &Target::h200);
}

void bind_config(nb::module_& m) {
  // The C++ SearchConfig's defaults are the single source of the Python defaults.
  nb::class_<SearchConfig>(m, "SearchConfig")
      .def(nb::init<>())
      .def_rw("preset", &SearchConfig::preset)
      .def_rw("time_budget_s", &SearchConfig::time_budget_s)
      .def_rw("threads", &SearchConfig::threads)
      .def_rw("pruning", &SearchConfig::pruning)
      .def_rw("max_kernel_ops", &SearchConfig::max_kernel_ops)
      .def_rw("max_block_ops", &SearchConfig::max_block_ops)
      .def_rw("max_block_graphs", &SearchConfig::max_block_graphs)
      .def_rw("max_block_inputs", &SearchConfig::max_block_inputs)
      .def_rw("max_block_outputs", &SearchConfig::max_block_outputs)
      .def_rw("max_grid_axes", &SearchConfig::max_grid_axes)
      .def_rw("max_grids", &SearchConfig::max_grids)
      .def_rw("max_forloop_ranges", &SearchConfig::max_forloop_ranges)
      .def_rw("max_verified", &SearchConfig::max_verified)
      .def_rw("grid_sizes_override", &SearchConfig::grid_sizes_override)
      .def_rw("forloop_ranges_override", &SearchConfig::forloop_ranges_override)
      .def_rw("grids", &SearchConfig::grids)
      .def_rw("imaps", &SearchConfig::imaps)
      .def_rw("omaps", &SearchConfig::omaps)
      .def_rw("fmaps", &SearchConfig::fmaps)
      .def_rw("target", &SearchConfig::target)
      .def_rw("seed", &SearchConfig::seed);
  m.attr("MAX_BLOCK_INPUTS") = kMaxKeyInputs;
}

void bind_records(nb::module_& m) {
  nb::class_<SearchStats>(m, "SearchStatsInfo")
      .def_ro("states_explored", &SearchStats::states_explored)
      .def_ro("states_pruned", &SearchStats::states_pruned)
      .def_ro("candidates_verified", &SearchStats::candidates_verified)
      .def_ro("candidates_accepted", &SearchStats::candidates_accepted)
      .def_ro("candidates_unverified", &SearchStats::candidates_unverified)
      .def_ro("seconds_enumerate", &SearchStats::seconds_enumerate)
      .def_ro("seconds_verify", &SearchStats::seconds_verify)
      .def_ro("seconds_rank", &SearchStats::seconds_rank)
      .def_ro("seconds_saturate", &SearchStats::seconds_saturate);

  nb::class_<SearchProgress>(m, "SearchProgressInfo")
      .def_ro("tasks_done", &SearchProgress::tasks_done)
      .def_ro("tasks_total", &SearchProgress::tasks_total)
      .def_ro("states_explored", &SearchProgress::states_explored)
      .def_ro("candidates_accepted", &SearchProgress::candidates_accepted)
      .def_ro("seconds", &SearchProgress::seconds);

  nb::class_<SearchResult>(m, "SearchResultInfo")
      // Copies: each Python graph owns its C++ graph outright (block graphs stay shared,
      // and they are immutable).
      .def_prop_ro("candidates",
                   [](const SearchResult& r) {
                     std::vector<KernelGraph> graphs;
                     for (const auto& c : r.candidates) graphs.push_back(*c);
                     return graphs;
                   })
      .def_ro("costs", &SearchResult::costs)
      .def_ro("stats", &SearchResult::stats)
      .def_ro("reason", &SearchResult::reason);
}

// `hook` is None or a callable taking a SearchProgressInfo and returning a bool (false
// stops the search). An exception from the hook, or a signal whose handler raises (Ctrl-C),
// stops the search; it is raised again once the search has returned, because it cannot
// cross the C++ search's threads.
SearchResult run_search(const KernelGraph& target, const SearchConfig& config, nb::object hook) {
  std::optional<nb::python_error> pending;  // destroyed under the GIL, after the search
  auto on_progress = [&](const SearchProgress& p) -> bool {
    nb::gil_scoped_acquire acquire;
    if (pending) return false;
    if (PyErr_CheckSignals() != 0) {
      pending.emplace();  // fetches the exception the signal handler raised
      return false;
    }
    if (hook.is_none()) return true;
    try {
      return nb::cast<bool>(hook(p));
    } catch (nb::python_error& e) {
      pending.emplace(std::move(e));
    } catch (const std::exception& e) {
      // A result that is not a bool: nothing may unwind through the search's threads.
      PyErr_SetString(PyExc_TypeError, e.what());
      pending.emplace();
    }
    return false;
  };
  SearchResult result;
  {
    nb::gil_scoped_release release;
    result = search(target, config, on_progress);
  }
  if (pending) throw std::move(*pending);
  return result;
}

}  // namespace

void bind_search(nb::module_& m) {
  bind_target(m);
  bind_config(m);
  bind_records(m);
  m.def("search", &run_search, "target"_a, "config"_a, "hook"_a.none());
}

}  // namespace mj::python

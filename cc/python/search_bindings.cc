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

#include "cc/cost/estimate.h"
#include "cc/cost/kernel_graph_work.h"
#include "cc/cost/rank.h"
#include "cc/cost/roofline.h"
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
  // The roofline inputs are writable so that the CPU target can take the numbers measured
  // on the machine it runs on (mirage_jax/runtime/calibration.py); check() says which field
  // the model cannot use.
  nb::class_<Target>(m, "Target")
      .def_ro("name", &Target::name)
      .def_rw("dram_bandwidth", &Target::dram_bandwidth)
      .def_rw("peak_flops", &Target::peak_flops)
      .def_rw("generated_flops", &Target::generated_flops)
      .def_rw("generated_bf16_flops", &Target::generated_bf16_flops)
      .def_rw("generated_f32_bf16_flops", &Target::generated_f32_bf16_flops)
      .def_rw("last_level_cache_bytes", &Target::last_level_cache_bytes)
      .def_rw("cache_bandwidth", &Target::cache_bandwidth)
      .def_rw("custom_call_overhead_s", &Target::custom_call_overhead_s)
      .def_rw("library_kernel_overhead_s", &Target::library_kernel_overhead_s)
      .def_rw("library_small_m_rows", &Target::library_small_m_rows)
      .def_rw("library_small_m_matmul_flops", &Target::library_small_m_matmul_flops)
      .def_rw("library_small_m_bandwidth", &Target::library_small_m_bandwidth)
      .def_rw("split_stream_bandwidth", &Target::split_stream_bandwidth)
      .def_rw("library_widens_16_bit", &Target::library_widens_16_bit)
      .def_rw("cores", &Target::cores)
      .def_rw("page_walk_s", &Target::page_walk_s)
      .def_rw("run_overhead_s", &Target::run_overhead_s)
      .def_rw("block_overhead_s", &Target::block_overhead_s)
      .def_rw("vector_width_floats", &Target::vector_width_floats)
      .def("check", &cost::check_target)
      .def_static("cpu_host", [] { return Target::cpu_host(); })
      .def_static("a100", &Target::a100)
      .def_static("h100", &Target::h100)
      .def_static("h200", &Target::h200);

  m.def(
      "estimate_cost",
      [](const KernelGraph& g, const Target& t) {
        const cost::CostEstimate c = cost::estimate(g, t);
        return nb::make_tuple(c.seconds, c.breakdown);
      },
      "graph"_a, "target"_a,
      "(estimated seconds, one line per kernel) of a kernel graph on a target: the cost "
      "model the search ranks candidates by.");

  m.attr("COST_TIE") = cost::kCostTie;
  m.def("tied_with_best", &cost::tied_with_best, "costs"_a,
        "How many leading entries of `costs` (ascending) are within COST_TIE of the first; "
        "none when the first is not finite.");
  m.def("cut_row_bytes", &cost::cut_row_bytes, "graph"_a,
        "The bytes a graph's generated kernels read from tiles that their for-loop walks "
        "along the tensor's innermost dim (a piece of every row per step), counting only "
        "tiles that are at least a quarter of their kernel's reads: the order of candidates "
        "the cost model ties.");
  m.def(
      "kernel_costs",
      [](const KernelGraph& g, const Target& t) {
        cost::check_target(t);
        nb::list kernels;
        for (const cost::KernelWork& w : cost::kernel_graph_work(g)) {
          const cost::KernelTime k = cost::kernel_time(w, t);
          nb::dict d;
          d["label"] = w.label;
          d["customized"] = w.kind == cost::KernelKind::kCustomized;
          d["bytes_read"] = w.bytes_read;
          d["bytes_written"] = w.bytes_written;
          d["flops"] = w.flops;
          d["blocks"] = w.blocks;
          d["runs_loaded"] = w.runs_loaded;
          d["on_chip_copy_bytes"] = w.on_chip_copy_bytes;
          d["arena_pass_bytes"] = w.arena_pass_bytes;
          d["cut_row_bytes"] = w.cut_row_bytes;
          double walked_pages = 0;
          for (const auto& [pages, loads] : w.paged_loads) {
            if (pages > t.tlb_entries) walked_pages += pages * loads;
          }
          d["page_walks"] = t.tlb_entries > 0 ? walked_pages : 0.0;
          d["dram_bytes"] = k.dram_bytes;
          d["cached_bytes"] = k.cached_bytes;
          d["memory_s"] = k.memory_s;
          d["compute_s"] = k.compute_s;
          d["parallel_efficiency"] = k.parallel_efficiency;
          d["overhead_s"] = k.overhead_s;
          d["seconds"] = k.seconds;
          kernels.append(d);
        }
        return kernels;
      },
      "graph"_a, "target"_a,
      "The cost model's terms for each kernel of a graph on a target (what it reads, "
      "computes and how long each part takes), for calibrating and explaining it.");
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
      .def_ro("seconds", &SearchProgress::seconds)
      .def_ro("best_cost", &SearchProgress::best_cost)
      .def_ro("target_cost", &SearchProgress::target_cost);

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

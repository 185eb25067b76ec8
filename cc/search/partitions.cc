#include "cc/search/partitions.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "cc/search/user_structure.h"

namespace mj::search {

using cost::Target;
using cost::TargetKind;
using ir::Dim3;

namespace {

// Whether a split of class `split` (a grid axis's or the loop's) cuts a dim of class c: a
// dim of that index, or a stack of partial results walked chunk by chunk.
bool walked_by(const ClassTable& table, int c, int split) {
  if (split == kNoClass || c == kUnitClass) return false;
  if (c == split) return true;
  const ClassTable::Stacking* st = table.stacking(c);
  return st && st->chunks == split;
}

// The divisors of n that are >= lo, ascending.
std::vector<int> divisors_from(int64_t n, int lo) {
  std::vector<int> small, large;
  for (int64_t k = 1; k * k <= n; ++k) {
    if (n % k != 0) continue;
    small.push_back(int(k));
    if (k * k != n) large.push_back(int(n / k));
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  small.erase(small.begin(), std::lower_bound(small.begin(), small.end(), lo));
  return small;
}

// Split counts for one index of size n: the override list's divisors, else all >= 2.
std::vector<int> split_counts(int64_t n, const std::vector<int>& override_list) {
  if (override_list.empty()) return divisors_from(n, 2);
  std::vector<int> d;
  for (int k : override_list) {
    if (k >= 2 && n % k == 0) d.push_back(k);
  }
  return d;
}

// How well `blocks` fills `units` parallel units: the idle share of the last wave, then
// the number of blocks (fewer blocks move fewer replicated tiles).
std::pair<double, int64_t> fill_rank(int64_t blocks, int units) {
  const int64_t waves = (blocks + units - 1) / units;
  return {double(waves * units - blocks) / double(waves * units), blocks};
}

// The bytes one block keeps on chip for its inputs' tiles in one loop iteration, about.
double tile_bytes(const std::vector<BlockInputSpec>& inputs, const BlockLayout& l,
                  const ClassTable& table) {
  double total = 0;
  for (const BlockInputSpec& in : inputs) {
    double elems = 1;
    for (size_t d = 0; d < in.shape.size(); ++d) {
      int64_t n = in.shape[d];
      const int c = in.classes[d];
      for (int a = 0; a < 3; ++a) {
        if (c != kUnitClass && l.axis_class[a] == c) n /= l.grid[a];
      }
      if (!in.whole && walked_by(table, c, l.loop_class)) n /= l.forloop_range;
      elems *= double(n);
    }
    total += elems * dtype_bytes(in.dtype);
  }
  return total;
}

double on_chip_budget(const Target& t) {
  if (t.kind == TargetKind::kGpu) return double(t.shared_memory_per_block) / 2;
  return double(t.l2_bytes) / 2;
}

// Every way to give each input, for one index class, the dim it is split along.
void assign_dims(const std::vector<BlockInputSpec>& inputs, int cls, const ClassTable& table,
                 std::vector<std::vector<int>>& choices) {
  choices.clear();
  for (const BlockInputSpec& in : inputs) {
    std::vector<int> dims;
    for (int d = 0; d < int(in.classes.size()); ++d) {
      if (walked_by(table, in.classes[d], cls)) dims.push_back(d);
    }
    if (dims.empty()) dims.push_back(-1);
    choices.push_back(dims);
  }
}

// Whether the loop walks a dim of every whole input (BlockInputSpec::whole).
bool whole_inputs_walked(const std::vector<BlockInputSpec>& inputs, int loop_class, int range,
                         const ClassTable& table) {
  for (const BlockInputSpec& in : inputs) {
    if (!in.whole) continue;
    if (range < 2) return false;
    if (std::none_of(in.classes.begin(), in.classes.end(),
                     [&](int c) { return walked_by(table, c, loop_class); })) {
      return false;
    }
  }
  return true;
}

// Cartesian product helper: calls f for each combination of one entry per list.
void for_each_combination(const std::vector<std::vector<int>>& lists,
                          const std::function<void(const std::vector<int>&)>& f) {
  std::vector<int> pick(lists.size());
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == lists.size()) {
      f(pick);
      return;
    }
    for (int v : lists[i]) {
      pick[i] = v;
      rec(i + 1);
    }
  };
  rec(0);
}

struct GridChoice {
  Dim3 grid{1, 1, 1};
  std::array<int, 3> axis_class{kNoClass, kNoClass, kNoClass};
};

int64_t blocks_of(const GridChoice& g) { return int64_t(g.grid[0]) * g.grid[1] * g.grid[2]; }

// Every split of 1..max_grid_axes eligible classes (assigned to x, y, z in ascending class
// order, so permuted grids are not generated twice), with every combination of counts.
std::vector<std::vector<GridChoice>> grids_per_split(const std::vector<int>& eligible,
                                                     const ClassTable& table,
                                                     const SearchConfig& config) {
  std::vector<std::vector<GridChoice>> groups;
  const int n = int(eligible.size());
  std::vector<int> chosen;
  std::function<void(int)> subsets = [&](int from) {
    if (!chosen.empty()) {
      std::vector<std::vector<int>> counts;
      for (int c : chosen)
        counts.push_back(split_counts(table.size(c), config.grid_sizes_override));
      std::vector<GridChoice> group;
      for_each_combination(counts, [&](const std::vector<int>& pick) {
        GridChoice g;
        for (size_t a = 0; a < chosen.size(); ++a) {
          g.grid[a] = pick[a];
          g.axis_class[a] = chosen[a];
        }
        group.push_back(g);
      });
      if (!group.empty()) groups.push_back(std::move(group));
    }
    if (int(chosen.size()) == std::min(config.max_grid_axes, 3)) return;
    for (int i = from; i < n; ++i) {
      chosen.push_back(eligible[i]);
      subsets(i + 1);
      chosen.pop_back();
    }
  };
  subsets(0);
  return groups;
}

// The bytes all blocks of grid g read from their inputs: each input once per block that
// does not split it.
double bytes_read(const std::vector<BlockInputSpec>& inputs, const GridChoice& g,
                  const ClassTable& table) {
  BlockLayout l;
  l.grid = g.grid;
  l.axis_class = g.axis_class;
  return tile_bytes(inputs, l, table) * double(blocks_of(g));
}

// Whether one block's input tiles fit on chip with no for-loop at all under grid g. Some
// block graphs cannot loop (a concat of a loop-walked tile with one the loop does not cut,
// as in LoRA's [X | X·A]), so their grids must make whole tiles fit.
bool fits_without_loop(const std::vector<BlockInputSpec>& inputs, const GridChoice& g,
                       const ClassTable& table, double budget) {
  BlockLayout l;
  l.grid = g.grid;
  l.axis_class = g.axis_class;
  return tile_bytes(inputs, l, table) <= budget;
}

// The caller's grids (SearchConfig::grids) in place of the derived ones: each axis of more
// than one block splits one eligible index whose size it divides, in every way (two axes
// never one index), and nothing caps them. A grid no index takes gives no layout at all,
// not the one-block fallback: the caller asked for these grids only.
std::vector<GridChoice> user_grid_choices(const std::vector<int>& eligible, const ClassTable& table,
                                          const SearchConfig& config) {
  std::vector<GridChoice> all;
  for (const Dim3& grid : config.grids) {
    std::vector<std::vector<int>> per_axis(3);
    for (int a = 0; a < 3; ++a) {
      if (grid[a] == 1) per_axis[a].push_back(kNoClass);
      for (int c : eligible) {
        if (grid[a] > 1 && table.size(c) % grid[a] == 0) per_axis[a].push_back(c);
      }
    }
    for_each_combination(per_axis, [&](const std::vector<int>& pick) {
      GridChoice g;
      g.grid = grid;
      for (int a = 0; a < 3; ++a) {
        for (int b = 0; b < a; ++b) {
          if (pick[a] != kNoClass && pick[a] == pick[b]) return;
        }
        g.axis_class[a] = pick[a];
      }
      all.push_back(g);
    });
  }
  return all;
}

std::vector<GridChoice> grid_choices(const std::vector<BlockInputSpec>& inputs,
                                     const std::vector<int>& eligible, const ClassTable& table,
                                     const SearchConfig& config) {
  if (!config.grids.empty()) return user_grid_choices(eligible, table, config);
  const int units = std::max(1, config.target.parallel_units());
  const double budget = on_chip_budget(config.target);
  auto groups = grids_per_split(eligible, table, config);
  // Keep grids that fill the machine in at most max_waves waves when any does: fewer
  // blocks leave units idle, more only add per-block overhead. Overrides are the caller's
  // choice. A CPU block is a task on a thread pool, cheap enough that 32 waves cost little,
  // and its smaller tiles can be walked in longer runs (see the last-slot rule below).
  const int64_t max_waves = config.target.kind == TargetKind::kCpu ? 32 : 8;
  if (config.grid_sizes_override.empty()) {
    auto fills = [&](const GridChoice& g) {
      return blocks_of(g) >= units && blocks_of(g) <= int64_t(units) * max_waves;
    };
    bool any = false;
    for (const auto& group : groups) any |= std::any_of(group.begin(), group.end(), fills);
    if (any) {
      for (auto& group : groups) {
        group.erase(std::remove_if(group.begin(), group.end(),
                                   [&](const GridChoice& g) { return !fills(g); }),
                    group.end());
      }
    }
  }
  // The splits that read the fewest bytes in all are enumerated first: the search is
  // depth-first within a time budget, so the first splits get most of it. Splitting a decode
  // step's 8 rows makes every block read all of the weight; splitting its columns, only the
  // 32 KB activation. In class order the rows came first, and a 0.3 s search of Llama's q
  // projection returned row splits only (0.157 ms by the cost model; 3 s found the column
  // split at 0.129).
  std::vector<std::pair<double, std::vector<GridChoice>>> by_bytes;
  for (auto& group : groups) {
    double least = std::numeric_limits<double>::infinity();
    for (const GridChoice& g : group) least = std::min(least, bytes_read(inputs, g, table));
    by_bytes.emplace_back(least, std::move(group));
  }
  std::stable_sort(by_bytes.begin(), by_bytes.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < groups.size(); ++i) groups[i] = std::move(by_bytes[i].second);
  std::vector<GridChoice> all;
  for (auto& group : groups) {
    auto by_fill = [&](const GridChoice& a, const GridChoice& b) {
      return fill_rank(blocks_of(a), units) < fill_rank(blocks_of(b), units);
    };
    std::stable_sort(group.begin(), group.end(), by_fill);
    // The fewest blocks move the fewest replicated tiles, but on a CPU their large tiles
    // may only fit on chip cut into many short runs (decode attention's K walked 8 keys at
    // a time across 4096 rows); the most blocks give each a slice it can walk in long runs.
    // With two or more slots, the last goes to the grid with the most blocks, and the cost
    // model (runs_loaded, paged_loads) decides between them.
    const bool most_blocks_slot = config.target.kind == TargetKind::kCpu && config.max_grids >= 2 &&
                                  int(group.size()) > config.max_grids &&
                                  config.grid_sizes_override.empty();
    // The best-filling grids have the fewest blocks and so the largest tiles, which may fit
    // on chip only with a for-loop. When none of them fits without one, also keep the
    // best-filling grid that does (within the waves kept above): the largest loopless tiles.
    std::optional<GridChoice> loopless;
    if (config.grid_sizes_override.empty()) {
      const size_t fewest = std::min(group.size(), size_t(std::max(config.max_grids, 0))) -
                            (most_blocks_slot ? 1 : 0);
      bool fewest_fit = false;
      for (size_t i = 0; i < fewest; ++i)
        fewest_fit |= fits_without_loop(inputs, group[i], table, budget);
      if (!fewest_fit) {
        for (size_t i = fewest; i < group.size() && !loopless; ++i) {
          if (fits_without_loop(inputs, group[i], table, budget)) loopless = group[i];
        }
      }
    }
    if (most_blocks_slot) {
      const auto most = std::max_element(
          group.begin(), group.end(),
          [](const GridChoice& a, const GridChoice& b) { return blocks_of(a) < blocks_of(b); });
      const auto slot = group.begin() + config.max_grids - 1;
      if (most > slot) std::rotate(slot, most, most + 1);
      if (loopless && blocks_of(*loopless) == blocks_of(*slot) &&
          loopless->axis_class == slot->axis_class) {
        loopless.reset();  // the most blocks are also the largest loopless tiles
      }
    }
    if (int(group.size()) > config.max_grids) group.resize(config.max_grids);
    all.insert(all.end(), group.begin(), group.end());
    if (loopless) all.push_back(*loopless);
  }
  if (all.empty()) all.push_back(GridChoice{});  // nothing to split: one block
  return all;
}

}  // namespace

bool preset_splits_reductions(const SearchConfig& config) { return config.preset == "attention"; }

bool partials_allowed(const SearchConfig& config, int kernel_ops) {
  return preset_splits_reductions(config) && kernel_ops + 1 < config.max_kernel_ops;
}

bool splits_reduced_index(const BlockLayout& layout, const std::vector<int>& output_classes) {
  for (int a = 0; a < 3; ++a) {
    if (layout.grid[a] > 1 && std::find(output_classes.begin(), output_classes.end(),
                                        layout.axis_class[a]) == output_classes.end()) {
      return true;
    }
  }
  return false;
}

std::vector<BlockLayout> block_layouts(const std::vector<BlockInputSpec>& inputs,
                                       const std::vector<int>& output_classes,
                                       const ClassTable& table, const SearchConfig& config,
                                       bool partials, const std::vector<int>& combinable) {
  std::set<int> present, chunk_indices;
  for (const BlockInputSpec& in : inputs) {
    for (int c : in.classes) {
      if (c == kUnitClass) continue;
      present.insert(c);
      if (const ClassTable::Stacking* st = table.stacking(c)) chunk_indices.insert(st->chunks);
    }
  }
  const std::set<int> outs(output_classes.begin(), output_classes.end());
  std::vector<int> grid_eligible, loop_eligible;
  for (int c : present) {
    const bool can_combine =
        partials && std::find(combinable.begin(), combinable.end(), c) != combinable.end();
    if (outs.count(c) || can_combine) grid_eligible.push_back(c);
    // The loop accumulates over its iterations, which is only right for an index the
    // outputs no longer have. A stack of partials is walked only chunk by chunk (below):
    // any other cut gives tiles mixing several chunks, which no accumulator separates.
    if (!outs.count(c) && !table.stacking(c)) loop_eligible.push_back(c);
  }
  const double budget = on_chip_budget(config.target);
  std::vector<BlockLayout> layouts;
  for (const GridChoice& g : grid_choices(inputs, grid_eligible, table, config)) {
    BlockLayout base;
    base.grid = g.grid;
    base.axis_class = g.axis_class;
    // No loop at all is a layout like the others: it too must fit on chip, unless nothing
    // does (then it is the one layout left, and the cost model judges it).
    std::vector<std::pair<int, int>> loops;
    if (!chunk_indices.empty()) {
      // Combining partial results: one iteration per chunk, so that each iteration's tile
      // is one partial with the original tile's classes and an accumulator sums the
      // partials. Nothing else removes a stacked dim (a reduce over it would also sum the
      // positions within each partial), so a graph reading partials always walks them, and
      // one loop cannot walk the chunks of two different splits. The range is fixed by the
      // stack, so neither the override list nor the on-chip budget chooses it.
      if (chunk_indices.size() > 1) continue;
      const int chunks = *chunk_indices.begin();
      loops.push_back({chunks, int(table.size(chunks))});
    }
    if (loops.empty() && tile_bytes(inputs, base, table) <= budget) loops.push_back({kNoClass, 1});
    for (int c : loop_eligible) {
      if (!chunk_indices.empty()) break;
      int64_t per_block = table.size(c);
      for (int a = 0; a < 3; ++a) {
        if (g.axis_class[a] == c) per_block /= g.grid[a];
      }
      int taken = 0;
      for (int f : split_counts(per_block, config.forloop_ranges_override)) {
        if (taken == config.max_forloop_ranges) break;
        BlockLayout probe = base;
        probe.loop_class = c;
        probe.forloop_range = f;
        // The smallest ranges whose tiles fit on chip: fewer, larger iterations.
        if (config.forloop_ranges_override.empty() && tile_bytes(inputs, probe, table) > budget) {
          continue;
        }
        loops.push_back({c, f});
        ++taken;
      }
    }
    if (loops.empty()) loops.push_back({kNoClass, 1});
    for (auto [loop_class, range] : loops) {
      if (!whole_inputs_walked(inputs, loop_class, range, table)) continue;
      BlockLayout l = base;
      l.loop_class = loop_class;
      l.forloop_range = range;
      // imaps: per axis, each input's dim of the axis's class; fmaps likewise.
      std::vector<std::vector<int>> lists;  // per (axis, input), then per input for fmap
      std::vector<std::vector<int>> per;
      for (int a = 0; a < 3; ++a) {
        assign_dims(inputs, g.axis_class[a], table, per);
        lists.insert(lists.end(), per.begin(), per.end());
      }
      assign_dims(inputs, loop_class, table, per);
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].whole) per[i] = {-1};
      }
      lists.insert(lists.end(), per.begin(), per.end());
      const size_t n = inputs.size();
      for_each_combination(lists, [&](const std::vector<int>& pick) {
        BlockLayout full = l;
        full.imaps.assign(n, Dim3{-1, -1, -1});
        full.fmaps.assign(n, -1);
        for (size_t i = 0; i < n; ++i) {
          for (int a = 0; a < 3; ++a) full.imaps[i][a] = pick[a * n + i];
          full.fmaps[i] = pick[3 * n + i];
        }
        if (user_layout_allowed(config, full)) layouts.push_back(std::move(full));
      });
    }
  }
  return layouts;
}

std::vector<Dim3> output_omaps(const BlockLayout& layout, const DimClasses& tile_classes,
                               bool allow_partials) {
  std::vector<std::vector<int>> per_axis;
  std::vector<int> partial_axes;
  for (int a = 0; a < 3; ++a) {
    std::vector<int> dims;
    if (layout.grid[a] > 1) {
      for (int d = 0; d < int(tile_classes.size()); ++d) {
        if (tile_classes[d] == layout.axis_class[a]) dims.push_back(d);
      }
      if (dims.empty() && allow_partials) partial_axes.push_back(a);
      if (dims.empty() && !allow_partials) return {};
    }
    if (dims.empty()) dims.push_back(-1);
    per_axis.push_back(dims);
  }
  std::vector<Dim3> omaps;
  for_each_combination(per_axis, [&](const std::vector<int>& pick) {
    Dim3 o{pick[0], pick[1], pick[2]};
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < a; ++b) {
        if (o[a] != -1 && o[a] == o[b]) return;  // two axes storing along one dim
      }
    }
    // Partial results go side by side along the last dim no other axis stores along. Any
    // other free dim holds the same partials permuted, which the combining kernel reads
    // the same way, so one choice is enough (the paper's omap stacks along the last dim).
    for (int a : partial_axes) {
      int d = int(tile_classes.size()) - 1;
      while (d >= 0 && (o[0] == d || o[1] == d || o[2] == d)) --d;
      if (d < 0) return;
      o[a] = d;
    }
    omaps.push_back(o);
  });
  return omaps;
}

}  // namespace mj::search

#pragma once
// What a search may build and for how long: the limits a caller sets (the Python
// SearchConfig's fields and defaults come from here).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cc/cost/target.h"
#include "cc/ir/graph.h"

namespace mj::search {

struct SearchConfig {
  // "mlp": grids split only indices that reach the outputs; "attention": grids may also
  // split a reduced index (split-KV partial results), and the kernel ops after a block
  // graph are spent only on combining partial results (a block graph that stores none
  // ends the candidate); "lora": allows concat. Presets only widen or narrow the candidate
  // sets below; they never name graphs.
  std::string preset = "mlp";
  double time_budget_s = 120;  // wall time; the best found so far comes back when spent
  int threads = 0;             // 0 = std::thread::hardware_concurrency()
  bool pruning = true;         // abstract-expression pruning (off only for ablations)
  int max_kernel_ops = 2;      // ops appended at kernel level (a customized op counts one)
  int max_block_ops = 6;       // block ops per block graph, accumulators included
  int max_block_graphs = 1;    // customized ops per candidate
  int max_block_inputs = 4;
  int max_block_outputs = 2;
  int max_grid_axes = 2;       // grid axes with more than one block
  int max_grids = 3;           // grid sizes tried per choice of split indices
  int max_forloop_ranges = 2;  // for-loop ranges tried per choice of loop index
  // 0: every complete candidate is verified as soon as it is found. N > 0: candidates are
  // collected unverified, ranked by the cost model, and verified best first until N are
  // accepted; the rest are dropped unverified. Wide attention searches find hundreds of
  // candidates that would each cost a long verification, and only the best few are used.
  int max_verified = 0;
  // When non-empty, these replace the sizes derived from the shapes and the target: grid
  // sizes per split axis and for-loop ranges (each still has to divide).
  std::vector<int> grid_sizes_override;
  std::vector<int> forloop_ranges_override;
  // Structure the caller fixes, as Mirage's griddims, imaps, omaps and fmaps (a tuned or
  // known-good partition that the derived candidates would never offer, such as a grid with
  // more blocks than the target's cap). When non-empty, block graphs use only these grids
  // (instead of the derived ones, max_grid_axes, max_grids and the cap; a grid's axes of
  // more than one block each split an index whose size they divide), only these imaps for
  // every input, omaps for every output and for-loop dims (fmaps) for every input. A map
  // has one entry per grid axis: the tensor dim it splits, -1 for none (an axis of one
  // block is always -1). user_structure.h checks them.
  std::vector<ir::Dim3> grids;
  std::vector<ir::Dim3> imaps;
  std::vector<ir::Dim3> omaps;
  std::vector<int> fmaps;
  cost::Target target = cost::Target::cpu_host();
  uint64_t seed = 0;  // verifier randomness
  // Ranks verified candidates (lower is better). Empty: the default ranking of rank.h.
  std::function<double(const ir::KernelGraph&)> cost;
};

}  // namespace mj::search

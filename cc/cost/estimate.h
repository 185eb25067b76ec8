#pragma once
// The analytic cost of a whole kernel graph on a target: what the search ranks
// verified candidates by before it profiles the top few. Kernels run one after another; the
// graph's time is the sum of kernel_time (roofline.h) over kernel_graph_work
// (kernel_graph_work.h).
#include <cstdint>
#include <string>

#include "cc/cost/target.h"
#include "cc/ir/graph.h"

namespace mj::cost {

struct CostEstimate {
  double bytes_read = 0;  // all loads from kernel-level tensors, replicated re-reads included
  double bytes_written = 0;
  double flops = 0;
  int64_t blocks = 0;  // total over the customized ops (0 when there are none)
  // Σ roofline time / Σ roofline time after the wave losses, over all kernels (1 when no
  // grid leaves units idle).
  double parallel_efficiency = 1;
  double seconds = 0;           // +infinity when some block graph cannot run on the target
  double bytes_from_cache = 0;  // the part of bytes_read the model serves from the cache
  std::string breakdown;        // one line per kernel, for reports
};

// Throws std::invalid_argument for a target the model cannot use (check_target).
CostEstimate estimate(const ir::KernelGraph& g, const Target& t);

}  // namespace mj::cost

#include "cc/cost/estimate.h"

#include <algorithm>
#include <cstdio>

#include "cc/cost/kernel_graph_work.h"
#include "cc/cost/roofline.h"

namespace mj::cost {

using ir::KernelGraph;

namespace {

std::string kernel_line(const KernelWork& w, const KernelTime& k) {
  char buf[256];
  const char* bound = !k.fits                     ? "exceeds shared memory"
                      : k.memory_s >= k.compute_s ? "memory-bound"
                                                  : "compute-bound";
  std::snprintf(buf, sizeof buf,
                ": read %.3f MB (%.3f MB cached), write %.3f MB, %.4f GFLOP, "
                "efficiency %.2f, %.1f us, %s\n",
                w.bytes_read / 1e6, k.cached_bytes / 1e6, w.bytes_written / 1e6, w.flops / 1e9,
                k.parallel_efficiency, k.seconds * 1e6, bound);
  return w.label + buf;
}

}  // namespace

CostEstimate estimate(const KernelGraph& g, const Target& t) {
  check_target(t);
  CostEstimate c;
  double roofline_s = 0, after_waves_s = 0;
  for (const KernelWork& w : kernel_graph_work(g)) {
    const KernelTime k = kernel_time(w, t);
    c.bytes_read += w.bytes_read;
    c.bytes_written += w.bytes_written;
    c.flops += w.flops;
    c.blocks += w.blocks;
    c.bytes_from_cache += k.cached_bytes;
    c.seconds += k.seconds;
    const double roofline = std::max(k.memory_s, k.compute_s);
    roofline_s += roofline;
    after_waves_s += roofline / k.parallel_efficiency;
    c.breakdown += kernel_line(w, k);
  }
  if (after_waves_s > 0) c.parallel_efficiency = roofline_s / after_waves_s;
  return c;
}

}  // namespace mj::cost

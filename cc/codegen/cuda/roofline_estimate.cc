#include "cc/codegen/cuda/roofline_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "cc/cost/block_graph_work.h"
#include "cc/ir/op_kind.h"

namespace mj::codegen::cuda {

using ir::BlockGraph;
using ir::Op;
using ir::OpKind;

namespace {

// Per SM, for every GPU the presets cover (sm_80, sm_90): shared memory, threads, blocks
// and 32-bit registers; the runtime reserves 1 KiB of shared memory per block.
constexpr int64_t kSharedPerSm80 = 164 << 10, kSharedPerSm90 = 228 << 10;
constexpr int kThreadsPerSm = 2048, kBlocksPerSm = 32, kRegistersPerSm = 65536;
constexpr int64_t kReservedPerBlock = 1 << 10;
// HBM latency under load, seconds: the bytes in flight a full-bandwidth stream needs are
// bandwidth x this.
constexpr double kMemoryLatencyS = 700e-9;
// mma.sync's share of Hopper's dense tensor peak (the rest needs wgmma); Ampere's mma.sync
// is its peak.
constexpr double kMmaSyncOnHopper = 0.5;
// The most of the HBM bandwidth one SM can draw, in multiples of its fair share
// (bandwidth / SMs): a grid on few SMs is bounded by them.
constexpr double kSmBandwidthShare = 4.0;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Bytes one block loads per for-loop iteration into shared memory (body tiles), and once
// (invariant tiles).
std::pair<double, double> staged_bytes(const BlockGraph& bg) {
  double body = 0, once = 0;
  for (const Op& op : bg.ops()) {
    if (op.kind != OpKind::kInput) continue;
    const int t = op.outputs.at(0);
    const double bytes =
        double(element_count(bg.tensor(t).shape)) * dtype_bytes(bg.kernel_input_dtype(op.io_index));
    (op.fmap >= 0 ? body : once) += bytes;
  }
  return {body, once};
}

}  // namespace

cost::Target gpu_target(const std::string& name) {
  if (name == "a100") return cost::Target::a100();
  if (name == "h100") return cost::Target::h100();
  if (name == "h200") return cost::Target::h200();
  throw std::invalid_argument("unknown GPU target '" + name + "' (known: a100, h100, h200)");
}

CudaKernelEstimate estimate_cuda_kernel(const BlockGraph& bg, const CudaPlan& plan,
                                        const cost::Target& t) {
  CudaKernelEstimate e;
  e.target = t.name;
  // Split-K runs split_k blocks per output tile (and a short second kernel, not modeled
  // but for its workspace traffic).
  e.blocks = int64_t(bg.grid()[0]) * bg.grid()[1] * bg.grid()[2] * plan.split_k;
  e.threads = plan.threads;
  e.smem_bytes = plan.smem_bytes;
  e.pipeline_stages = plan.pipeline_stages;
  e.split_k = plan.split_k;
  const bool hopper = t.shared_memory_per_block > (163 << 10);
  // ---- occupancy
  const int64_t smem_sm = hopper ? kSharedPerSm90 : kSharedPerSm80;
  const int by_smem = int(smem_sm / (plan.smem_bytes + kReservedPerBlock));
  const int by_threads = kThreadsPerSm / plan.threads;
  const int by_registers = kRegistersPerSm / (kAssumedRegisters * plan.threads);
  e.resident_blocks = std::max(1, std::min({by_smem, by_threads, by_registers, kBlocksPerSm}));
  e.occupancy_limit = by_smem <= std::min(by_threads, by_registers) ? "shared memory"
                      : by_registers < by_threads                   ? "registers (assumed)"
                                                                    : "threads";
  const double slots = double(t.sms) * e.resident_blocks;
  e.waves = double(e.blocks) / slots;
  // Busy SMs: a grid smaller than the GPU puts one block on each of `blocks` SMs; a larger
  // one fills ceil(waves) waves, the last partly.
  const double busy_sms = std::min(double(t.sms), double(e.blocks));
  e.wave_efficiency = e.blocks <= t.sms ? busy_sms / t.sms : e.waves / std::ceil(e.waves);
  // ---- work
  const cost::KernelWork w = cost::block_graph_work(bg);
  e.dram_bytes =
      w.bytes_read + w.bytes_written + 2.0 * 4 * double(e.blocks) * double(plan.workspace_floats);
  e.flops = w.flops;
  double tf32_flops = 0, fma_matmul_flops = 0;
  for (size_t o = 0; o < bg.ops().size(); ++o) {
    const Op& op = bg.ops()[o];
    if (op.kind != OpKind::kMatmul && op.kind != OpKind::kAccumExpMatmul) continue;
    const ir::Shape& a = bg.tensor(op.inputs.at(0)).shape;
    const ir::Shape& c = bg.tensor(op.outputs.at(0)).shape;
    const bool per_iteration = bg.tensor(op.inputs.at(0)).phase == ir::Phase::kBody ||
                               bg.tensor(op.inputs.at(1)).phase == ir::Phase::kBody;
    const double mm_flops = 2.0 * double(element_count(c)) * double(a.back()) *
                            (per_iteration ? bg.forloop_range() : 1) *
                            double(e.blocks / plan.split_k);
    switch (plan.matmuls[o].path) {
      case MatmulPath::kMma16: e.tensor_flops += mm_flops; break;
      case MatmulPath::kMmaTf32: tf32_flops += mm_flops; break;
      case MatmulPath::kFma: fma_matmul_flops += mm_flops; break;
    }
  }
  e.tensor_flops = std::min(e.tensor_flops, e.flops);
  tf32_flops = std::min(tf32_flops, e.flops - e.tensor_flops);
  const double other_flops = std::max(0.0, e.flops - e.tensor_flops - tf32_flops);
  const double mma_rate = t.tensor_core_flops * (hopper ? kMmaSyncOnHopper : 1.0);
  const double compute_s =
      e.tensor_flops / mma_rate + tf32_flops / (mma_rate / 2) + other_flops / t.peak_flops;
  const double ideal_compute_s = e.tensor_flops / t.tensor_core_flops +
                                 tf32_flops / (t.tensor_core_flops / 2) +
                                 other_flops / t.peak_flops;
  e.tensor_flops += tf32_flops;
  const double memory_s = e.dram_bytes / t.dram_bandwidth;
  e.roofline_s = std::max(memory_s, ideal_compute_s);
  e.bound = memory_s >= ideal_compute_s ? "memory" : "compute";
  // ---- latency: the bytes the resident blocks have in flight against what HBM needs
  const auto [body, once] = staged_bytes(bg);
  const double ahead =
      plan.pipeline_stages > 1 ? body * (plan.pipeline_stages - 1) : std::max(body, once);
  const double in_flight = ahead * std::min(double(e.blocks), slots);
  e.memory_efficiency = std::min(1.0, in_flight / (t.dram_bandwidth * kMemoryLatencyS));
  const double reachable = std::min(1.0, kSmBandwidthShare * busy_sms / t.sms);
  const double mem_s = memory_s / std::max(1e-3, std::min(e.memory_efficiency, reachable) *
                                                     (e.blocks <= t.sms ? 1.0 : e.wave_efficiency));
  const double busy_compute_s = compute_s / e.wave_efficiency;
  e.estimate_s =
      plan.pipeline_stages > 1 ? std::max(mem_s, busy_compute_s) : mem_s + busy_compute_s;
  e.share = e.estimate_s > 0 ? e.roofline_s / e.estimate_s : 0;
  return e;
}

std::string CudaKernelEstimate::text() const {
  return target + ": " + std::to_string(blocks) + " blocks x " + std::to_string(threads) +
         " threads" + (split_k > 1 ? " (split-K " + std::to_string(split_k) + ")" : "") + ", " +
         std::to_string(smem_bytes / 1024) + " KiB shared, " + std::to_string(pipeline_stages) +
         " stages; " + std::to_string(resident_blocks) + " block(s)/SM (" + occupancy_limit +
         "), " + fmt("%.2f", waves) + " waves (" + fmt("%.0f%%", 100 * wave_efficiency) +
         " busy); " + fmt("%.3g", dram_bytes / 1e6) + " MB, " + fmt("%.3g", flops / 1e9) +
         " GFLOP (" + fmt("%.0f%%", flops > 0 ? 100 * tensor_flops / flops : 0) +
         " tensor cores); " + bound + "-bound roofline " + fmt("%.2f", roofline_s * 1e6) +
         " us, estimate " + fmt("%.2f", estimate_s * 1e6) + " us: " + fmt("%.0f%%", 100 * share) +
         " of roofline (HBM in flight " + fmt("%.0f%%", 100 * memory_efficiency) + ")";
}

}  // namespace mj::codegen::cuda

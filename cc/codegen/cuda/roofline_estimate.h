#pragma once
// A generated kernel's share of a GPU's roofline, estimated from its plan before any GPU
// runs it (what `explain` and `python -m mirage_jax cuda-plan` print). The roofline time is
// what the kernel's bytes and flops need at the machine's peaks; the estimate adds what the
// plan loses:
//   - occupancy: blocks resident per SM, limited by shared memory, threads and registers
//     (registers are not known before ptxas: kAssumedRegisters a thread);
//   - waves: a grid smaller than the GPU leaves SMs idle (one block an SM), a larger one runs
//     ceil(B / (SMs x resident)) waves, the last partly idle; an SM draws at most
//     kSmBandwidthShare times its share of HBM bandwidth;
//   - latency: HBM needs about bandwidth x latency bytes in flight; a block has in flight the
//     tiles it loads ahead (stages - 1 iterations' worth, one iteration when unpipelined);
//   - overlap: without a pipeline, loading and computing an iteration take turns;
//   - compute rate: mma.sync reaches about half of Hopper's dense tensor peak (wgmma is needed
//     for the rest), TF32 half the 16-bit rate, f32 FMA the CUDA-core peak.
// Approximate by construction: it ranks plans and names the loss, it does not time them.
#include <string>

#include "cc/codegen/cuda/cuda_plan.h"
#include "cc/cost/target.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cuda {

constexpr int kAssumedRegisters = 128;

struct CudaKernelEstimate {
  std::string target;
  int64_t blocks = 0;
  int threads = 0;
  int64_t smem_bytes = 0;
  int pipeline_stages = 1;
  int split_k = 1;
  int resident_blocks = 0;      // per SM
  std::string occupancy_limit;  // what bounds resident_blocks
  double waves = 0;
  double wave_efficiency = 1;  // the busy share of the SMs
  double dram_bytes = 0;
  double flops = 0;
  double tensor_flops = 0;       // of flops, on tensor cores (16-bit and TF32)
  std::string bound;             // "memory" or "compute"
  double roofline_s = 0;         // at the machine's peaks
  double memory_efficiency = 1;  // in-flight bytes / the bytes HBM needs in flight
  double estimate_s = 0;
  double share = 0;          // roofline_s / estimate_s
  std::string text() const;  // one line
};

CudaKernelEstimate estimate_cuda_kernel(const ir::BlockGraph& bg, const CudaPlan& plan,
                                        const cost::Target& target);

// The target of a name: "a100", "h100" or "h200"; std::invalid_argument otherwise.
cost::Target gpu_target(const std::string& name);

}  // namespace mj::codegen::cuda

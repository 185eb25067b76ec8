// The code generators: block graph -> kernel source text.
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "cc/codegen/cpu/generate.h"
#include "cc/codegen/cpu/loop_steps.h"
#include "cc/codegen/cpu/prelude.h"
#include "cc/codegen/cuda/cuda_plan.h"
#include "cc/codegen/cuda/generate.h"
#include "cc/codegen/cuda/roofline_estimate.h"
#include "cc/python/bindings.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace mj::python {

void bind_codegen(nb::module_& m) {
  m.def("generate_cpu_kernel", &codegen::cpu::generate_cpu_kernel, "block_graph"_a, "symbol"_a);
  m.def("cpu_kernel_includes", &codegen::cpu::cpu_kernel_includes,
        "The system headers every generated CPU kernel includes, before any of its own code: "
        "the text of the precompiled header its compiles share.");
  m.def("cpu_kernel_symbol", &codegen::cpu::cpu_kernel_symbol, "block_graph"_a);
  m.def("cpu_code_hash", &codegen::cpu::cpu_code_hash, "graph"_a,
        "A content hash of the graph as the CPU code generator builds it (each loop run as "
        "many steps an iteration as its products need): equal for graphs whose kernels are "
        "the same code.");
  m.def(
      "generate_cuda_kernel",
      [](const ir::BlockGraph& bg, const std::string& symbol, int64_t smem_limit_bytes,
         bool allow_tf32, int sm_count) {
        codegen::cuda::CudaOptions options;
        options.smem_limit = smem_limit_bytes;
        options.allow_tf32 = allow_tf32;
        options.sm_count = sm_count;
        return codegen::cuda::generate_cuda_kernel(bg, symbol, options);
      },
      "block_graph"_a, "symbol"_a, "smem_limit_bytes"_a, "allow_tf32"_a = false, "sm_count"_a = 132,
      "The CUDA translation unit of a block graph, its shared memory planned for "
      "smem_limit_bytes per block; allow_tf32: f32 matmuls may run on TF32 tensor cores; "
      "sm_count: the GPU's SMs (a grid of fewer than half of them splits its loop).");
  m.def("cuda_kernel_symbol", &codegen::cuda::cuda_kernel_symbol, "block_graph"_a);
  m.def(
      "cuda_kernel_estimate",
      [](const ir::BlockGraph& bg, int64_t smem_limit_bytes, bool allow_tf32,
         const std::string& target) {
        codegen::cuda::CudaOptions options;
        options.smem_limit = smem_limit_bytes;
        options.allow_tf32 = allow_tf32;
        options.sm_count = codegen::cuda::gpu_target(target).sms;
        const codegen::cuda::CudaPlan plan = codegen::cuda::plan_cuda_kernel(bg, options);
        const codegen::cuda::CudaKernelEstimate e =
            codegen::cuda::estimate_cuda_kernel(bg, plan, codegen::cuda::gpu_target(target));
        nb::dict d;
        d["target"] = e.target;
        d["blocks"] = e.blocks;
        d["threads"] = e.threads;
        d["smem_bytes"] = e.smem_bytes;
        d["pipeline_stages"] = e.pipeline_stages;
        d["split_k"] = plan.split_k;
        d["resident_blocks"] = e.resident_blocks;
        d["occupancy_limit"] = e.occupancy_limit;
        d["waves"] = e.waves;
        d["wave_efficiency"] = e.wave_efficiency;
        d["dram_bytes"] = e.dram_bytes;
        d["flops"] = e.flops;
        d["tensor_flops"] = e.tensor_flops;
        d["bound"] = e.bound;
        d["roofline_s"] = e.roofline_s;
        d["memory_efficiency"] = e.memory_efficiency;
        d["estimate_s"] = e.estimate_s;
        d["share"] = e.share;
        d["text"] = e.text();
        return d;
      },
      "block_graph"_a, "smem_limit_bytes"_a, "allow_tf32"_a = false, "target"_a = "h100",
      "The plan of the block graph's CUDA kernel against a GPU's roofline (a100, h100, h200): "
      "occupancy, waves, bytes, flops, the roofline time and the estimated share of it.");
  m.def("cuda_shared_memory_limit", &codegen::cuda::shared_memory_limit, "arch"_a);
}

}  // namespace mj::python

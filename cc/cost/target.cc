// Target presets. Every number is approximate: the CPU ones come from measurements and
// lscpu on the development machines, the GPU ones from public datasheets
// (SXM parts, dense math). They only need to rank candidates, not predict times exactly.
#include "cc/cost/target.h"

#include <stdexcept>

namespace mj::cost {

double Target::fma_peak_flops() const {
  return double(cores) * vector_width_floats * fma_units * 2.0 * clock_hz;
}

Target Target::cpu_host(const HostMeasurements& measured) {
  Target t;
  t.kind = TargetKind::kCpu;
  t.name = "cpu_host";
  t.cores = 2;
  t.vector_width_floats = 8;  // AVX2; the machines that expose AVX-512 still issue 2×256-bit FMAs
  t.fma_units = 2;
  t.clock_hz = 3.0e9;  // sustained all-core clock, approximate
  t.l1_bytes = 32 << 10;
  t.l2_bytes = 1 << 20;
  t.tlb_entries = 2048;  // Zen 3's L2 DTLB, 4 KiB pages
  // Fitted to the measurement in kernel_work.h: 4.2M page-crossing runs cost ~120 ms more
  // on 2 cores, about 55 ns each (a walk plus the cache miss it usually brings).
  t.page_walk_s = 55e-9;
  // Per line-run (kernel_work.h, runs_loaded): 40 ns keeps the 20 ns a run of 128 bytes
  // (half a line-run) was fitted at, 1M of them costing ~12 ms more per core pair than 256K
  // runs of 512 bytes carrying the same bytes. A calibration measures it (8.7-9.5 ns on the
  // development machine).
  t.run_overhead_s = 40e-9;
  t.last_level_cache_bytes = 32 << 20;
  t.cache_bandwidth = 150e9;            // L3 reads, both cores; rough (32 B/cycle/core peak)
  t.dram_bandwidth = 21e9;              // a jitted read of a large array
  t.peak_flops = 120e9;                 // a 2048³ f32 matmul
  t.custom_call_overhead_s = 35e-6;     // one FFI dispatch
  t.library_kernel_overhead_s = 2e-6;   // one XLA thunk; an estimate, small next to FFI
  t.library_small_m_rows = 16;          // M = 8 measured slow; the cut-off is a guess
  t.library_small_m_bandwidth = 6.4e9;  // x[8, 8192] @ w[8192, 2048], w streamed cold
  t.library_widens_16_bit = true;
  if (measured.cores > 0) t.cores = measured.cores;
  if (measured.read_bandwidth > 0) t.dram_bandwidth = measured.read_bandwidth;
  if (measured.matmul_flops > 0) t.peak_flops = measured.matmul_flops;
  if (measured.generated_flops > 0) t.generated_flops = measured.generated_flops;
  if (measured.ffi_dispatch_s > 0) t.custom_call_overhead_s = measured.ffi_dispatch_s;
  t.library_small_m_matmul_flops = 0.18 * t.fma_peak_flops();
  return t;
}

namespace {

// What the three GPU presets share; launches cost about the same through FFI or XLA.
Target gpu_base(const char* name) {
  Target t;
  t.kind = TargetKind::kGpu;
  t.name = name;
  t.registers_per_sm = 65536;
  t.custom_call_overhead_s = 5e-6;
  t.library_kernel_overhead_s = 5e-6;
  return t;
}

}  // namespace

Target Target::a100() {
  Target t = gpu_base("a100");
  t.sms = 108;
  t.shared_memory_per_block = 163 << 10;
  t.dram_bandwidth = 2.0e12;  // HBM2e, 80 GB part
  t.peak_flops = 19.5e12;
  t.tensor_core_flops = 312e12;
  t.last_level_cache_bytes = 40 << 20;
  t.cache_bandwidth = 5e12;
  return t;
}

Target Target::h100() {
  Target t = gpu_base("h100");
  t.sms = 132;
  t.shared_memory_per_block = 227 << 10;
  t.dram_bandwidth = 3.35e12;  // HBM3
  t.peak_flops = 67e12;
  t.tensor_core_flops = 989e12;
  t.last_level_cache_bytes = 50 << 20;
  t.cache_bandwidth = 10e12;
  return t;
}

Target Target::h200() {
  Target t = h100();  // the same GH100 die; only the memory differs
  t.name = "h200";
  t.dram_bandwidth = 4.8e12;  // HBM3e, 141 GB
  return t;
}

namespace {

void require_positive(const Target& t, const char* field, double v) {
  if (!(v > 0)) {
    throw std::invalid_argument("target '" + t.name + "': " + field + " must be positive, got " +
                                std::to_string(v));
  }
}

}  // namespace

void check_target(const Target& t) {
  require_positive(t, "dram_bandwidth", t.dram_bandwidth);
  require_positive(t, "peak_flops", t.peak_flops);
  require_positive(t, "last_level_cache_bytes", double(t.last_level_cache_bytes));
  require_positive(t, "cache_bandwidth", t.cache_bandwidth);
  if (t.library_small_m_rows > 0) {
    require_positive(t, "library_small_m_matmul_flops", t.library_small_m_matmul_flops);
  }
  if (!(t.library_small_m_bandwidth >= 0) || !(t.split_stream_bandwidth >= 0)) {
    throw std::invalid_argument("target '" + t.name +
                                "': library_small_m_bandwidth and split_stream_bandwidth "
                                "must not be negative");
  }
  if (t.kind == TargetKind::kCpu) {
    require_positive(t, "cores", t.cores);
  } else {
    require_positive(t, "sms", t.sms);
    require_positive(t, "shared_memory_per_block", double(t.shared_memory_per_block));
    require_positive(t, "tensor_core_flops", t.tensor_core_flops);
  }
  // Written as !(x >= 0) so that a NaN from a failed measurement is refused too.
  if (!(t.custom_call_overhead_s >= 0) || !(t.library_kernel_overhead_s >= 0) ||
      !(t.block_overhead_s >= 0) || !(t.page_walk_s >= 0) || !(t.run_overhead_s >= 0)) {
    throw std::invalid_argument("target '" + t.name + "': overheads must not be negative");
  }
  if (!(t.generated_flops >= 0) || !(t.generated_bf16_flops >= 0) ||
      !(t.generated_f32_bf16_flops >= 0)) {
    throw std::invalid_argument("target '" + t.name +
                                "': generated_flops, generated_bf16_flops and "
                                "generated_f32_bf16_flops must not be negative");
  }
}

}  // namespace mj::cost

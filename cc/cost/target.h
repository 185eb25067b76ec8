#pragma once
// The machine a μGraph is ranked for (estimate.h). The numbers are roofline
// inputs, not a simulator: what matters is that they rank candidates the way the hardware
// does, so each field says which part of the model reads it.
#include <cstdint>
#include <string>

namespace mj::cost {

enum class TargetKind : uint8_t { kCpu, kGpu };

// Values measured on the host at run time (0 keeps the preset's default), so the ranking can
// follow the machine it runs on rather than the one the presets were written on.
struct HostMeasurements {
  double read_bandwidth = 0;   // bytes/s of a large streaming read
  double matmul_flops = 0;     // flop/s of a large f32 matmul
  double generated_flops = 0;  // flop/s of a generated kernel's block matmuls
  double ffi_dispatch_s = 0;   // seconds of one FFI custom call doing no work
  int cores = 0;
};

struct Target {
  TargetKind kind = TargetKind::kCpu;
  std::string name;

  // ---- both kinds
  double dram_bandwidth = 0;  // bytes/s from main memory (HBM on a GPU)
  // f32 flop/s of the library's kernels (CPU: a large XLA matmul) and of a generated
  // kernel's block graph (CPU: its tile loops, compiled by g++; 0: peak_flops). On a GPU both
  // are the fp32 FMA pipes and generated_flops is not read.
  double peak_flops = 0;
  double generated_flops = 0;
  // CPU: the flop/s of a generated product whose B is bfloat16, 32 rows or more, for a
  // bfloat16 A and for a float32 A (kernel_work.h, *_bf16_weight_matmul_flops): on a CPU with
  // AMX tiles several times generated_flops, a float32 A a third of that (it is split into
  // three bfloat16 parts). 0: generated_flops.
  double generated_bf16_flops = 0;
  double generated_f32_bf16_flops = 0;
  // The cache that serves tiles re-read by the blocks a replicated input is shared by
  // (CPU L3, GPU L2), and its bandwidth. A replicated tensor that fits in half of it (the
  // other half is left to the streamed operands) is re-read from it, not from DRAM. On a
  // CPU the same bandwidth prices a block's on-chip copies (kernel_work.h).
  int64_t last_level_cache_bytes = 0;
  double cache_bandwidth = 0;
  // Fixed cost per kernel: a customized op (CPU: one FFI dispatch; GPU: a launch through
  // FFI), and a library kernel (one XLA fusion or matmul call).
  double custom_call_overhead_s = 0;
  double library_kernel_overhead_s = 0;
  // The library matmul whose result has at most library_small_m_rows rows per matrix runs at
  // library_small_m_matmul_flops (XLA:CPU sends such dots to a GEMV-like path, measured at
  // about 18% of FMA peak); larger ones at peak_flops.
  int library_small_m_rows = 0;
  double library_small_m_matmul_flops = 0;
  // The bytes/s such a dot of 2 or more rows streams its operands from memory at: XLA:CPU's
  // small-M path reads a weight too large for the cache at a fraction of a plain stream
  // (6-8 GB/s at 4-16 rows where a generated kernel or XLA's one-row GEMV gets 16-19 GB/s on
  // the development machine), so without it a kernel-level matmul next to a fused prefix
  // looks as fast as the generated product it replaces. 0: dram_bandwidth.
  double library_small_m_bandwidth = 0;
  // XLA:CPU's dots take no 16-bit floats: each bfloat16 or float16 operand is first widened
  // into a new float32 buffer, written and read again on every call (the wrapped_convert
  // fusions of its HLO), so a kernel-level matmul over a bfloat16 weight moves 5x its bytes
  // where a generated kernel widens tiles in registers. GPU libraries take them as they are.
  bool library_widens_16_bit = false;

  // ---- CPU: blocks are tasks spread over the cores
  int cores = 0;
  int vector_width_floats = 0;  // f32 lanes per FMA instruction
  int fma_units = 0;            // FMA instructions issued per cycle per core
  double clock_hz = 0;
  // Per core. The search sizes CPU tiles by them; the model does not penalize tiles that
  // outgrow them (a known gap).
  int64_t l1_bytes = 0;
  int64_t l2_bytes = 0;
  // A tile load whose runs lie on more pages than the data TLB maps pays one page walk per
  // run (kernel_work.h, paged_loads); 0 entries: not modeled.
  int tlb_entries = 0;
  double page_walk_s = 0;
  // The fixed cost of one contiguous run of a loop-walked tile (kernel_work.h, runs_loaded).
  double run_overhead_s = 0;
  // The bytes/s of a generated kernel's stream cut into more blocks than cores, each core
  // walking several strips one after another: 5-12% under dram_bandwidth (one strip a core)
  // on the Intel development machine whatever the strips' width or tile height
  // (benchmarks/gemv_tiles.py: x[8, 4096] @ w[4096, 6144] over 2 blocks 4.2 ms, over 4 or 8
  // 4.4-4.6), 18% in the calibration's probe, which ordered a dozen of a program's candidates
  // that the model tied. XLA's one-row dot shards its weight likewise and streams at it too.
  // 0: dram_bandwidth.
  double split_stream_bandwidth = 0;
  // The fixed cost of one block (a task on the thread pool: its hand-off, its tile set-up and
  // the epilogue that stores its outputs), paid by the core that runs it; 0: not modeled.
  double block_overhead_s = 0;

  // ---- GPU: blocks are thread blocks spread over the SMs
  int sms = 0;
  int64_t shared_memory_per_block = 0;  // the opt-in maximum; a larger block cannot launch
  int registers_per_sm = 0;             // 32-bit registers (descriptive; occupancy is not modeled)
  double tensor_core_flops = 0;         // dense f16/bf16 with f32 accumulation

  // Where the blocks of a grid run in parallel: cores on a CPU, SMs on a GPU.
  int parallel_units() const { return kind == TargetKind::kCpu ? cores : sms; }
  // cores × lanes × FMA units × 2 flops × clock: the CPU's arithmetic ceiling.
  double fma_peak_flops() const;

  // This machine class: 2-core AMD EPYC (Zen 3/4 class) with AVX2 + FMA, at the numbers
  // measured on the development machines, each overridden by a non-zero measurement.
  static Target cpu_host(const HostMeasurements& measured = {});
  // Datasheet-level numbers for the SXM parts, approximate (dense, no sparsity).
  static Target a100();
  static Target h100();
  static Target h200();
};

// Throws std::invalid_argument naming the first field the model would divide by that is not
// positive (or the units of the target's kind).
void check_target(const Target& t);

}  // namespace mj::cost

#include "cc/codegen/cuda/generate.h"

#include "cc/codegen/common/code_writer.h"
#include "cc/codegen/common/kernel_symbol.h"
#include "cc/codegen/cuda/cuda_plan.h"
#include "cc/codegen/cuda/emit_elementwise.h"
#include "cc/codegen/cuda/emit_handler.h"
#include "cc/codegen/cuda/emit_matmul.h"
#include "cc/codegen/cuda/emit_rows.h"
#include "cc/codegen/cuda/emit_tile_io.h"
#include "cc/codegen/cuda/prelude.h"
#include "cc/codegen/cuda/tile_access.h"
#include "cc/ir/error.h"
#include "cc/ir/hash.h"
#include "cc/ir/op_kind.h"

namespace mj::codegen::cuda {

using common::CodeWriter;
using common::phase_of;
using ir::block_graph_hash;
using ir::BlockGraph;
using ir::IrError;
using ir::is_accumulator;
using ir::is_elementwise;
using ir::Op;
using ir::op_kind_name;
using ir::OpKind;
using ir::Phase;

namespace {

using cuda::Emit;

const std::string kSync = "__syncthreads();";

// The non-elementwise head of a pass, computed into its own shared tile (or, for a matmul
// feeding an accum_sum, added into the running sum).
void emit_head(const Emit& e, const Op& op, size_t op_index) {
  switch (op.kind) {
    case OpKind::kMatmul: {
      const int into = e.plan.matmul_adds_into[op_index];
      cuda::MatmulCall call;
      call.op = int(op_index);
      call.c = into >= 0 ? into : op.outputs.at(0);
      call.accumulate = into >= 0;
      cuda::emit_matmul(e, cuda::tensor_operand(e, op.inputs.at(0), call.op, true),
                        cuda::tensor_operand(e, op.inputs.at(1), call.op, false), call);
      return;
    }
    case OpKind::kReduce: cuda::emit_reduce(e, op); return;
    case OpKind::kRmsNorm: cuda::emit_rms_norm(e, op); return;
    default:
      throw IrError("cuda codegen: no code for block op " + std::string(op_kind_name(op.kind)));
  }
}

// The pass ending at op `o`, if one does: its head (unless it is an accumulator, finished
// where it stands, or a concat view), then its elementwise chain, each followed by a barrier.
void emit_pass_at(const Emit& e, size_t o) {
  const std::vector<int>& pass = e.plan.pass_ending_at[o];
  if (pass.empty()) return;
  const Op& head = e.bg.ops()[pass.front()];
  if (head.kind == OpKind::kMatmul && pass.size() > 1) {
    // The chain runs on each product in registers as the matmul stores it.
    cuda::MatmulCall call;
    call.op = pass.front();
    call.c = head.outputs.at(0);
    call.store = [&e, &pass](const std::string& value, const std::vector<std::string>& idx) {
      cuda::emit_chain_store(e, pass, value, idx);
    };
    cuda::emit_matmul(e, cuda::tensor_operand(e, head.inputs.at(0), call.op, true),
                      cuda::tensor_operand(e, head.inputs.at(1), call.op, false), call);
    e.w.line(kSync);
    return;
  }
  if (!is_elementwise(head.kind) && !is_accumulator(head.kind) && head.kind != OpKind::kConcat) {
    emit_head(e, head, size_t(pass.front()));
    e.w.line(kSync);
  }
  if (pass.size() > 1 || is_elementwise(head.kind)) {
    cuda::emit_elementwise_chain(e, pass);
    e.w.line(kSync);
  }
}

// Every computation of `phase` in op order (accumulators excepted).
void emit_phase_ops(const Emit& e, Phase phase) {
  const std::vector<Op>& ops = e.bg.ops();
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.kind == OpKind::kInput || op.kind == OpKind::kOutput || is_accumulator(op.kind) ||
        phase_of(e.bg, op) != phase) {
      continue;
    }
    emit_pass_at(e, o);
  }
}

bool is_body_input(const Op& op) { return op.kind == OpKind::kInput && op.fmap >= 0; }

// Pointers to every tile of the block. Body input tiles move with the loop: when it runs more
// than once they are named inside it, per iteration and pipeline stage.
void declare_fixed_pointers(const Emit& e, bool with_body_inputs) {
  for (const Op& op : e.bg.ops()) {
    if (op.kind == OpKind::kOutput) continue;
    if (is_body_input(op) && !with_body_inputs) continue;
    cuda::declare_tile_pointer(e, op.outputs.at(0), "0", "0");
  }
}

// The loop over the for-loop iterations. Pipelined tiles (plan.pipeline_stages = S stages):
// iterations 0 .. S-2 were issued before the loop, one commit group each; iteration it
// issues it + S - 1 into stage (it + S - 1) % S, which iteration it - 1 last read and left
// behind a barrier, and commits a group even when there is nothing left to load, so that
// "all but the newest S - 1 groups complete" always means iteration it's tiles have landed.
// Which kernel of a block graph is written: the whole computation, or with split-K
// (CudaPlan::split_k) the loop's share of one split and then the sum of the shares.
enum class Part : uint8_t { kWhole, kPartial, kFinish };

// The loop over this block's for-loop iterations (all of them, or one split's: it0 + li).
// Pipelined tiles (plan.pipeline_stages = S stages): local iterations 0 .. S-2 were issued
// before the loop, one commit group each; iteration li issues li + S - 1 into stage
// (li + S - 1) % S, which iteration li - 1 last read and left behind a barrier, and commits
// a group even when there is nothing left to load, so that "all but the newest S - 1
// groups complete" always means iteration li's tiles have landed.
void emit_loop(const Emit& e, int iterations) {
  using cuda::Staged;
  const int stages = e.plan.pipeline_stages;
  const bool pipelined = cuda::has_staged_inputs(e, Staged::kPipelined);
  const bool per_iteration = cuda::has_staged_inputs(e, Staged::kPerIteration);
  const std::string n = std::to_string(iterations);
  const std::string stage_of_it = "li % " + std::to_string(stages);
  e.w.open("for (int li = 0; li < " + n + "; ++li)");
  e.w.line("const int it = it0 + li;");
  for (const Op& op : e.bg.ops()) {
    if (is_body_input(op)) cuda::declare_tile_pointer(e, op.outputs.at(0), stage_of_it, "it");
  }
  if (per_iteration) {
    // Single-buffered tiles: their one stage was last read in iteration it - 1, which ended
    // with a barrier.
    e.w.line("// this iteration's single-buffered tiles");
    cuda::emit_stage_loads(e, Staged::kPerIteration, "it", "0");
    e.w.line("mj_cuda::cp_async_commit();");
  }
  if (pipelined) {
    const std::string ahead = std::to_string(stages - 1);
    e.w.open("if (li + " + ahead + " < " + n + ")");
    cuda::emit_stage_loads(e, Staged::kPipelined, "it + " + ahead,
                           "(li + " + ahead + ") % " + std::to_string(stages));
    e.w.close();
    e.w.line("mj_cuda::cp_async_commit();");
    // With single-buffered tiles in the group before the newest, only the newest may stay
    // in flight (only double buffering is planned then).
    e.w.line("mj_cuda::cp_async_wait<" + std::to_string(per_iteration ? 1 : stages - 1) + ">();");
  } else if (per_iteration) {
    e.w.line("mj_cuda::cp_async_wait<0>();");
  }
  if (pipelined || per_iteration) e.w.line(kSync);
  emit_phase_ops(e, Phase::kBody);
  cuda::emit_accumulators_update(e);
  e.w.close();
}

bool has_register_state(const Emit& e) {
  for (const cuda::MatmulPlan& mm : e.plan.matmuls) {
    if (mm.registers) return true;
  }
  for (const cuda::SoftmaxGroup& g : e.plan.softmax_groups) {
    if (g.registers) return true;
  }
  return false;
}

const char* kernel_name(Part part) {
  switch (part) {
    case Part::kPartial: return "kernel_partial";
    case Part::kFinish: return "kernel_finish";
    default: return "kernel";
  }
}

// Each accumulator tile with its offset in a block's workspace share (split-K).
std::vector<std::pair<int, int64_t>> workspace_tiles(const Emit& e) {
  std::vector<std::pair<int, int64_t>> out;
  int64_t offset = 0;
  for (const Op& op : e.bg.ops()) {
    if (!is_accumulator(op.kind)) continue;
    const int t = op.outputs.at(0);
    out.emplace_back(t, offset);
    offset += cuda::element_count(e.bg.tensor(t).shape);
  }
  return out;
}

// The linear index of this block among the grid's output tiles (split-K's workspace).
std::string block_linear(const BlockGraph& bg) {
  return "(int64_t(bz) * " + std::to_string(bg.grid()[1]) + " + by) * " +
         std::to_string(bg.grid()[0]) + " + bx";
}

void emit_kernel(const Emit& e, Part part) {
  const BlockGraph& bg = e.bg;
  using cuda::Staged;
  const int split = e.plan.split_k;
  const bool looped = bg.forloop_range() > 1;
  const bool pipelined =
      looped && part != Part::kFinish && cuda::has_staged_inputs(e, Staged::kPipelined);
  const int iterations = bg.forloop_range() / (part == Part::kPartial ? split : 1);
  e.w.open(std::string("__global__ void __launch_bounds__(") + std::to_string(e.plan.threads) +
           ") " + kernel_name(part) + "(const Io io)");
  e.w.line("extern __shared__ __align__(16) unsigned char smem[];");
  if (part == Part::kPartial) {
    // The split is the slowest part of blockIdx.z, so the grid's z extent stays gz * split.
    const std::string gz = std::to_string(bg.grid()[2]);
    e.w.line("[[maybe_unused]] const int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z % " +
             gz + ";");
    e.w.line("const int split = blockIdx.z / " + gz + ";");
    e.w.line("[[maybe_unused]] const int it0 = split * " + std::to_string(iterations) + ";");
  } else {
    e.w.line("[[maybe_unused]] const int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;");
    e.w.line("[[maybe_unused]] constexpr int it0 = 0;");
  }
  cuda::emit_alignment_flags(e);
  declare_fixed_pointers(e, /*with_body_inputs=*/!looped && part != Part::kFinish);
  e.w.line("// loop-invariant tiles, and the first iterations'");
  cuda::emit_stage_loads(e, Staged::kInvariant, "0", "0");
  e.w.line("mj_cuda::cp_async_commit();");
  if (pipelined) {
    for (int i = 0; i + 1 < e.plan.pipeline_stages; ++i) {
      const std::string local = std::to_string(i);
      if (i < iterations) cuda::emit_stage_loads(e, Staged::kPipelined, "it0 + " + local, local);
      e.w.line("mj_cuda::cp_async_commit();");
    }
  } else if (!looped) {
    cuda::emit_stage_loads(e, Staged::kPerIteration, "0", "0");
    e.w.line("mj_cuda::cp_async_commit();");
  }
  // Before the loop only the invariant tiles must have landed (the loop waits for its own).
  e.w.line(pipelined
               ? "mj_cuda::cp_async_wait<" + std::to_string(e.plan.pipeline_stages - 1) + ">();"
               : "mj_cuda::cp_async_wait<0>();");
  if (part != Part::kFinish) {
    cuda::emit_accumulators_init(e);
    cuda::emit_register_accumulators(e);
  }
  e.w.line(kSync);
  emit_phase_ops(e, Phase::kInvariant);
  if (part == Part::kFinish) {
    // Every split's share of each accumulator, added in split order.
    e.w.line("// the splits' partial sums");
    e.w.line("const float* const ws = io.ws + (" + block_linear(bg) + ") * " +
             std::to_string(split) + " * " + std::to_string(e.plan.workspace_floats) + ";");
    for (const auto& [t, offset] : workspace_tiles(e)) {
      const int64_t n = cuda::element_count(bg.tensor(t).shape);
      e.w.open("for (int i = threadIdx.x; i < " + std::to_string(n) +
               "; i += " + std::to_string(e.plan.threads) + ")");
      e.w.line("float v = 0.0f;");
      e.w.line("for (int s = 0; s < " + std::to_string(split) + "; ++s) v += ws[int64_t(s) * " +
               std::to_string(e.plan.workspace_floats) + " + " + std::to_string(offset) + " + i];");
      e.w.line(cuda::tile_name(t) + "[i] = v;");
      e.w.close();
    }
    e.w.line(kSync);
  } else if (looped) {
    emit_loop(e, iterations);
  } else {
    emit_phase_ops(e, Phase::kBody);
    cuda::emit_accumulators_update(e);
  }
  if (part != Part::kFinish && has_register_state(e)) {
    e.w.line("// accumulators kept in registers, into their tiles");
    cuda::emit_register_accumulators_spill(e);
    cuda::emit_softmax_state_spill(e);
    e.w.line(kSync);
  }
  if (part == Part::kPartial) {
    e.w.line("// this split's partial sums, for kernel_finish");
    e.w.line("float* const ws = io.ws + ((" + block_linear(bg) + ") * " + std::to_string(split) +
             " + split) * " + std::to_string(e.plan.workspace_floats) + ";");
    for (const auto& [t, offset] : workspace_tiles(e)) {
      const int64_t n = cuda::element_count(bg.tensor(t).shape);
      e.w.line("for (int i = threadIdx.x; i < " + std::to_string(n) +
               "; i += " + std::to_string(e.plan.threads) + ") ws[" + std::to_string(offset) +
               " + i] = " + cuda::tile_name(t) + "[i];");
    }
    e.w.close();
    return;
  }
  e.w.line("// epilogue");
  const std::vector<Op>& ops = bg.ops();
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (is_accumulator(op.kind)) {
      if (cuda::emit_accumulator_finish(e, o)) e.w.line(kSync);
    } else if (op.kind != OpKind::kInput && op.kind != OpKind::kOutput &&
               phase_of(bg, op) == Phase::kEpilogue) {
      emit_pass_at(e, o);
    }
  }
  e.w.line("// stores");
  for (const Op& op : ops) {
    if (op.kind == OpKind::kOutput) cuda::emit_output_store(e, op);
  }
  e.w.close();
}

}  // namespace

std::string cuda_kernel_symbol(const BlockGraph& bg) {
  return common::kernel_symbol("mj_cuda_", bg);
}

std::string generate_cuda_kernel(const BlockGraph& bg, const std::string& symbol,
                                 int64_t smem_limit_bytes) {
  CudaOptions options;
  options.smem_limit = smem_limit_bytes;
  return generate_cuda_kernel(bg, symbol, options);
}

std::string generate_cuda_kernel(const BlockGraph& bg, const std::string& symbol,
                                 const CudaOptions& options) {
  common::check_symbol(symbol, "generate_cuda_kernel");
  const cuda::CudaPlan plan = cuda::plan_cuda_kernel(bg, options);
  const std::string ns = symbol + "_kernel";
  CodeWriter w;
  const Emit e{w, bg, plan};
  w.line("// Generated by mirage_jax (cc/codegen/cuda) for block graph " + block_graph_hash(bg) +
         ": grid (" + std::to_string(bg.grid()[0]) + ", " + std::to_string(bg.grid()[1]) + ", " +
         std::to_string(bg.grid()[2]) + "), forloop_range " + std::to_string(bg.forloop_range()) +
         ", " + std::to_string(plan.threads) + " threads, " + std::to_string(plan.smem_bytes) +
         " bytes of shared memory, " + std::to_string(plan.pipeline_stages) + "-stage pipeline" +
         (plan.split_k > 1 ? ", split-K " + std::to_string(plan.split_k) : "") +
         (options.allow_tf32 ? ", TF32 allowed." : "."));
  w.raw(cuda::cuda_prelude());
  w.line("");
  w.open("namespace " + ns);
  cuda::emit_io_struct(e);
  w.line("");
  if (plan.split_k > 1) {
    emit_kernel(e, Part::kPartial);
    w.line("");
    emit_kernel(e, Part::kFinish);
  } else {
    emit_kernel(e, Part::kWhole);
  }
  w.line("");
  cuda::emit_handler_impl(e, symbol);
  w.close("  // namespace " + ns);
  w.line("");
  cuda::emit_handler_symbol(e, symbol, ns);
  return w.str();
}

}  // namespace mj::codegen::cuda

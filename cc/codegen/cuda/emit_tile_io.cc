#include "cc/codegen/cuda/emit_tile_io.h"

namespace mj::codegen::cuda {

using ir::dtype_bytes;
using ir::Op;
using ir::OpKind;
using ir::Shape;

namespace {

const char* block_var(int axis) {
  static const char* const kNames[3] = {"bx", "by", "bz"};
  return kNames[axis];
}

bool staged(const Emit& e, const Op& op, Staged which) {
  if (op.kind != OpKind::kInput) return false;
  const TilePlan& tile = e.plan.tiles[op.outputs.at(0)];
  if (tile.storage != Storage::kShared) return false;
  if (op.fmap < 0) return which == Staged::kInvariant;
  return which == (tile.stages > 1 ? Staged::kPipelined : Staged::kPerIteration);
}

void emit_tile_load(const Emit& e, const Op& input, const std::string& iteration,
                    const std::string& stage) {
  const int t = input.outputs.at(0);
  const TilePlan& tile = e.plan.tiles[t];
  const Shape& shape = e.bg.tensor(t).shape;
  const Shape& whole = e.bg.kernel_input_shape(input.io_index);
  const std::vector<int64_t> strides = dense_strides(whole);
  const std::string type = element_type(tile.element);
  const int64_t last = shape.back(), rows = element_count(shape) / last;
  e.w.open("");
  std::string at = str(tile.offset);
  if (tile.stages > 1) at += " + (" + stage + ") * " + str(tile.bytes);
  e.w.line(type + "* const dst = reinterpret_cast<" + type + "*>(smem + " + at + ");");
  e.w.line("const " + type + "* const src = io.in" + str(input.io_index) + " + " +
           input_origin(e.bg, input, iteration) + ";");
  // One chunk of `per` elements per step; chunks of a row are adjacent in both memories.
  auto copy_loop = [&](int64_t per, const std::string& copy) {
    const int64_t chunks_per_row = last / per;
    e.w.open("for (int c = threadIdx.x; c < " + str(rows * chunks_per_row) +
             "; c += " + str(e.plan.threads) + ")");
    e.w.line("const int row = c / " + str(chunks_per_row) + ", col = c % " + str(chunks_per_row) +
             " * " + str(per) + ";");
    std::vector<std::string> idx;
    int64_t below = 1;  // rows per step of dim d
    for (int d = int(shape.size()) - 2; d >= 0; --d) {
      idx.insert(idx.begin(),
                 shape[d] == 1 ? "0" : "(row / " + str(below) + " % " + str(shape[d]) + ")");
      below *= shape[d];
    }
    idx.push_back("col");
    const std::string to = "dst + row * " + str(tile.pitch) + " + col";
    const std::string from = "src + " + linear_index(idx, strides, shape, needs_wide_index(whole));
    e.w.line(copy == "=" ? "*(" + to + ") = *(" + from + ");"
                         : copy + "(" + to + ", " + from + ");");
    e.w.close();
  };
  if (tile.copy_bytes) {
    // The plan's copy width holds for every buffer XLA passes (kBufferAlignBytes); a base
    // pointer aligned less takes element loads, the same for the whole block.
    e.w.open("if (aligned_" + tile_name(t) + ")");
    copy_loop(tile.copy_bytes / dtype_bytes(tile.element),
              "mj_cuda::cp_async<" + str(tile.copy_bytes) + ">");
    e.w.close();
    e.w.open("else");
    copy_loop(1, "=");
    e.w.close();
  } else {
    copy_loop(1, "=");
  }
  e.w.close();
}

}  // namespace

void emit_alignment_flags(const Emit& e) {
  for (const Op& op : e.bg.ops()) {
    if (op.kind != OpKind::kInput) continue;
    const TilePlan& tile = e.plan.tiles[op.outputs.at(0)];
    if (tile.storage != Storage::kShared || tile.copy_bytes == 0) continue;
    const std::string name = "aligned_" + tile_name(op.outputs.at(0));
    e.w.line("[[maybe_unused]] const bool " + name + " = reinterpret_cast<uintptr_t>(io.in" +
             str(op.io_index) + ") % " + str(tile.copy_bytes) + " == 0;");
  }
}

bool has_staged_inputs(const Emit& e, Staged which) {
  for (const Op& op : e.bg.ops()) {
    if (staged(e, op, which)) return true;
  }
  return false;
}

void emit_stage_loads(const Emit& e, Staged which, const std::string& iteration,
                      const std::string& stage) {
  for (const Op& op : e.bg.ops()) {
    if (staged(e, op, which)) emit_tile_load(e, op, iteration, stage);
  }
}

void emit_output_store(const Emit& e, const Op& output) {
  const int t = output.inputs.at(0);
  const Shape& tile = e.bg.tensor(t).shape;
  const Shape& whole = e.bg.kernel_output_shape(output.io_index);
  const std::vector<int64_t> strides = dense_strides(whole);
  std::string origin;
  for (int a = 0; a < 3; ++a) {
    const int d = output.omap[a];
    if (e.bg.grid()[a] > 1 && d >= 0) {
      origin += std::string(origin.empty() ? "" : " + ") + "int64_t(" + block_var(a) + ") * " +
                str(tile[d] * strides[d]);
    }
  }
  const std::string type = element_type(e.bg.kernel_output_dtype(output.io_index));
  e.w.open("");
  e.w.line(type + "* const dst = io.out" + str(output.io_index) + " + " +
           (origin.empty() ? "0" : origin) + ";");
  const std::vector<std::string> idx = open_thread_loop(e, tile, "i", "flat");
  e.w.line("dst[" + linear_index(idx, strides, tile, needs_wide_index(whole)) +
           "] = mj_cuda::from_f32<" + type + ">(" + read_element(e, t, idx) + ");");
  e.w.close();
  e.w.close();
}

}  // namespace mj::codegen::cuda

#include "cc/cost/block_graph_work.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "cc/cost/block_working_set.h"
#include "cc/cost/cpu_vector_cost.h"
#include "cc/cost/op_flops.h"
#include "cc/layout/cpu_tile_reads.h"

namespace mj::cost {

using ir::BlockGraph;
using ir::dtype_bytes;
using ir::is_accumulator;
using ir::Op;
using ir::OpKind;
using ir::Phase;
using ir::Shape;
using ir::Tensor;

namespace {

constexpr double kPageBytes = 4096;
// A run of this many bytes or fewer is one load of a cache line; a longer run is a stream
// the prefetchers follow, costing about a line-run's fixed cost per this many of its bytes.
constexpr double kLineBytes = 64;
// A tile walked along its rows continues each row's run where the previous iteration ended:
// this many rows or fewer are as many sequential streams, which the prefetchers follow, and
// their runs cost nothing beyond their bytes. The activations x[8, k] of a GEMV walked 8 or
// 16 values of k a step had been charged a line-run per row and step, which ranked two-block
// products over 4-8 rows of the weight a step below the same products over 16 and 32, 2-7%
// faster on the machine (benchmarks/ranking_replay.py: the gated MLP and SwiGLU + down).
constexpr double kFollowedStreams = 16;
// A weight tile that the generated matmul streams with prefetches of its own pays nothing
// for its runs when each is this many bytes or more. Shorter runs still cost: decode
// attention's K[8, 8, 128, 4096] in [8, 128, 32] tiles (128-byte runs) ran 1.00-1.14x (5% on
// average, four timings) the time of [1, 128, 256] and [1, 128, 128] tiles of the same
// kernel, which the model had tied (benchmarks/ranking_replay.py, gqa_decode).
constexpr double kPrefetchedRunBytes = 256;

// The smallest side of a product that the generated CPU code sends to its bfloat16-weight
// path (cc/codegen/cpu/prelude.cc, matmul_amx: 32 x 32 tiles, 32 values of k a step).
constexpr double kMinWeightTile = 32;

// Whether tensor t is an input tile of `dtype` that the generated CPU code reads in place;
// every other tile, a float16 one among them, it holds as float32.
bool stored_in_place_as(const BlockGraph& g, int t, ir::DType dtype) {
  const Op& producer = g.ops()[g.tensor(t).producer];
  return producer.kind == OpKind::kInput && g.kernel_input_dtype(producer.io_index) == dtype &&
         layout::cpu_reads_in_place(g, producer);
}

std::string grid_label(const BlockGraph& g) {
  return "customized grid(" + std::to_string(g.grid()[0]) + "," + std::to_string(g.grid()[1]) +
         "," + std::to_string(g.grid()[2]) + ") forloop " + std::to_string(g.forloop_range());
}

// (runs, bytes between run starts) of a tile cut out of a row-major tensor: the run is the
// tile's innermost dims up to and including the first one it cuts.
std::pair<double, double> tile_runs(const Shape& tile, const Shape& whole, int bytes) {
  double run = 1, stride = 1;
  int d = int(tile.size()) - 1;
  for (; d >= 0; --d) {
    run *= double(tile[d]);
    stride *= double(whole[d]);
    if (tile[d] != whole[d]) break;
  }
  if (d < 0) return {1, 0};  // the whole tensor: one run
  return {tensor_elements(tile) / run, stride * bytes};
}

// The tensors matmuls read: the generated CPU code holds such a tensor in the arena (an
// elementwise pass ends there) where the matmul would otherwise read its operand in place.
std::set<int> matmul_operands(const BlockGraph& g) {
  std::set<int> read;
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kMatmul) read.insert(op.inputs.begin(), op.inputs.end());
  }
  return read;
}

}  // namespace

KernelWork block_graph_work(const BlockGraph& g) {
  KernelWork w;
  w.kind = KernelKind::kCustomized;
  w.label = grid_label(g);
  w.blocks = g.num_blocks();
  w.working_set_bytes = block_working_set_bytes(g);
  const double blocks = double(w.blocks);
  const double iterations = g.forloop_range();
  std::vector<double> cut_reads;           // bytes of each input tile walked along its rows
  std::set<int> scores_seen;               // of online softmaxes (block_op_cpu_extra_flops)
  std::map<int, double> input_tile_reads;  // tile tensor id -> its bytes_read term
  const std::set<int> product_operands = matmul_operands(g);
  std::vector<std::pair<double, double>> arena_passes;  // (input tile read, pass bytes)
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kInput) {
      const Tensor& tile = g.tensor(op.outputs[0]);
      const double loads = op.fmap >= 0 ? iterations : 1;
      const double read = tensor_elements(tile.shape) * dtype_bytes(tile.dtype) * loads * blocks;
      const Shape& whole = g.kernel_input_shape(op.io_index);
      const double tensor_bytes = tensor_elements(whole) * dtype_bytes(tile.dtype);
      w.bytes_read += read;
      if (op.fmap >= 0) input_tile_reads[op.outputs[0]] = read;
      if (!layout::cpu_reads_in_place(g, op)) w.copied_tile_bytes += read;
      const int last = int(whole.size()) - 1;
      if (iterations > 1 && op.fmap == last && tile.shape.back() < whole.back()) {
        cut_reads.push_back(read);
      }
      if (read > tensor_bytes) w.replicated.push_back({tensor_bytes, read - tensor_bytes});
      const auto [runs, stride_bytes] = tile_runs(tile.shape, whole, dtype_bytes(tile.dtype));
      const double run_bytes = tensor_elements(tile.shape) * dtype_bytes(tile.dtype) / runs;
      const bool followed = op.fmap == last && runs <= kFollowedStreams;
      const bool prefetched =
          layout::cpu_streams_weight_tile(g, op) && run_bytes >= kPrefetchedRunBytes;
      if (!followed && !prefetched) {
        w.runs_loaded += runs * loads * blocks * std::min(1.0, kLineBytes / run_bytes);
      }
      if (op.fmap >= 0 && iterations > 1) {
        const double pages = runs * std::min(1.0, stride_bytes / kPageBytes);
        w.paged_loads.push_back({pages, loads * blocks});
      }
      continue;
    }
    if (op.kind == OpKind::kOutput) {
      const Shape& whole = g.kernel_output_shape(op.io_index);
      w.bytes_written += tensor_elements(whole) * dtype_bytes(g.kernel_output_dtype(op.io_index));
      continue;
    }
    const bool per_iteration =
        is_accumulator(op.kind) || g.tensor(op.outputs[0]).phase == Phase::kBody;
    const double times = blocks * (per_iteration ? iterations : 1);
    if (op.kind == OpKind::kConcat) {
      w.on_chip_copy_bytes += 2 * tensor_elements(g.tensor(op.outputs[0]).shape) * 4 * times;
    }
    if (per_iteration && ir::is_elementwise(op.kind) && product_operands.count(op.outputs[0])) {
      for (int t : op.inputs) {
        const auto read = input_tile_reads.find(t);
        if (read == input_tile_reads.end()) continue;
        const double pass = 2 * tensor_elements(g.tensor(op.outputs[0]).shape) * 4 * times;
        arena_passes.push_back({read->second, pass});
        break;
      }
    }
    if (op.kind == OpKind::kMatmul) {
      const Shape& c = g.tensor(op.outputs[0]).shape;
      const double m = double(c[c.size() - 2]), n = double(c.back());
      const double k = double(g.tensor(op.inputs[0]).shape.back());
      const double count = times * tensor_elements(c) / (m * n);
      const bool bf16_weight = m >= kMinWeightTile && n >= kMinWeightTile && k >= kMinWeightTile &&
                               stored_in_place_as(g, op.inputs[1], ir::DType::kBF16);
      w.matmul_tiles.push_back({m, k, n, count, bf16_weight});
      if (bf16_weight) {
        const bool bf16_a = stored_in_place_as(g, op.inputs[0], ir::DType::kBF16);
        (bf16_a ? w.bf16_weight_matmul_flops : w.f32_bf16_weight_matmul_flops) +=
            2 * m * k * n * count;
      }
    }
    const OpFlops f = op_flops(g, op);
    w.flops += f.total * times;
    w.low_precision_matmul_flops += f.low_precision_matmul * times;
    w.cpu_extra_flops += block_op_cpu_extra_flops(g, op, scores_seen) * times;
  }
  for (const auto& [read, pass] : arena_passes) {
    if (read >= kMainStreamShare * w.bytes_read) w.arena_pass_bytes += pass;
  }
  for (double read : cut_reads) {
    if (read >= kMainStreamShare * w.bytes_read) w.cut_row_bytes += read;
  }
  return w;
}

}  // namespace mj::cost

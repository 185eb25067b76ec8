#include "cc/layout/cpu_tile_reads.h"

namespace mj::layout {

using ir::BlockGraph;
using ir::DType;
using ir::Op;
using ir::OpKind;
using ir::Shape;

bool tile_is_contiguous(const Shape& tile, const Shape& kernel) {
  size_t d = 0;
  while (d < tile.size() && tile[d] == 1) ++d;
  for (++d; d < tile.size(); ++d) {
    if (tile[d] != kernel[d]) return false;
  }
  return true;
}

bool matrices_lie_evenly(const Shape& tile, const Shape& kernel) {
  if (tile.size() < 2) return false;
  const size_t rows = tile.size() - 2;
  size_t d = 0;
  while (d < rows && tile[d] == 1) ++d;
  for (++d; d < rows; ++d) {
    if (tile[d] != kernel[d]) return false;
  }
  return true;
}

bool only_matmuls_read(const BlockGraph& bg, int t) {
  bool read = false;
  for (const Op& op : bg.ops()) {
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (op.inputs[i] != t) continue;
      read = true;
      const bool product_with_it =
          op.kind == OpKind::kAccumExpMatmul && i == 1 && op.inputs.at(0) != t;
      if (op.kind != OpKind::kMatmul && !product_with_it) return false;
    }
  }
  return read;
}

bool cpu_reads_in_place(const BlockGraph& bg, const Op& input) {
  const int t = input.outputs.at(0);
  const Shape& tile = bg.tensor(t).shape;
  const Shape& kernel = bg.kernel_input_shape(input.io_index);
  const DType dtype = bg.kernel_input_dtype(input.io_index);
  if (dtype != DType::kF32 && dtype != DType::kBF16) return false;
  if (dtype == DType::kF32 && tile_is_contiguous(tile, kernel)) return true;
  return matrices_lie_evenly(tile, kernel) && only_matmuls_read(bg, t);
}

bool cpu_streams_weight_tile(const BlockGraph& bg, const Op& input) {
  if (input.fmap < 0 || bg.forloop_range() <= 1 || !cpu_reads_in_place(bg, input)) return false;
  const int t = input.outputs.at(0);
  bool read = false;
  for (const Op& op : bg.ops()) {
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (op.inputs[i] != t) continue;
      read = true;
      const bool streamed_b = op.kind == OpKind::kMatmul && i == 1 && op.inputs.at(0) != t &&
                              bg.tensor(op.outputs.at(0)).shape.back() > kStreamedMinColumns;
      if (!streamed_b) return false;
    }
  }
  return read;
}

}  // namespace mj::layout

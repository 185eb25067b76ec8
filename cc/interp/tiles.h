#pragma once
// Where a block's tiles sit inside kernel tensors (docs/ir-semantics.md, "Block graph"), and
// copying them out and back.
#include <algorithm>
#include <string>
#include <vector>

#include "cc/interp/dense_shape.h"
#include "cc/interp/dense_tensor.h"
#include "cc/ir/error.h"
#include "cc/ir/graph.h"

namespace mj::interp {

// Offset of the input tile of a block-level kInput op for block `block` at loop iteration
// `iter`. A dim split by a grid axis a contributes b_a * S / g_a; a dim split by the loop
// contributes iter * tile, with tile = S / (g_a * F) when the same dim is split by both, so
// the loop walks inside the block's part. Also checks the declared tile shape against that
// rule, so an IR that disagrees with the interpreter fails loudly.
inline std::vector<int64_t> input_tile_origin(const ir::BlockGraph& bg, const ir::Op& input,
                                              const ir::Dim3& block, int iter) {
  const ir::Shape& kernel_shape = bg.kernel_input_shape(input.io_index);
  const ir::Shape& tile_shape = bg.tensor(input.outputs.at(0)).shape;
  const int rank = int(kernel_shape.size());
  std::vector<int64_t> origin(rank, 0);
  ir::Shape expected_tile = kernel_shape;
  for (int a = 0; a < 3; ++a) {
    const int dim = input.imap[a];
    if (bg.grid()[a] <= 1 || dim < 0) continue;
    expected_tile[dim] /= bg.grid()[a];
    origin[dim] += block[a] * expected_tile[dim];
  }
  if (input.fmap >= 0) {
    expected_tile[input.fmap] /= bg.forloop_range();
    origin[input.fmap] += int64_t(iter) * expected_tile[input.fmap];
  }
  if (expected_tile != tile_shape) {
    throw ir::IrError("interpret: block input " + std::to_string(input.io_index) + " (t" +
                      std::to_string(input.outputs.at(0)) + ") declares tile " +
                      ir::shape_str(tile_shape) + " but kernel shape " +
                      ir::shape_str(kernel_shape) + " cut by imap/fmap gives " +
                      ir::shape_str(expected_tile));
  }
  return origin;
}

// Offset at which block `block` stores the tile of a block-level kOutput op: b_a * tile
// along dim omap[a] for every grid axis a with g_a > 1.
inline std::vector<int64_t> output_tile_origin(const ir::BlockGraph& bg, const ir::Op& output,
                                               const ir::Shape& tile_shape, const ir::Dim3& block) {
  std::vector<int64_t> origin(tile_shape.size(), 0);
  for (int a = 0; a < 3; ++a) {
    const int dim = output.omap[a];
    if (bg.grid()[a] <= 1 || dim < 0) continue;
    origin[dim] += block[a] * tile_shape[dim];
  }
  return origin;
}

template <class V>
DenseTensor<V> cut_tile(const DenseTensor<V>& whole, const ir::Shape& tile_shape,
                        const std::vector<int64_t>& origin) {
  DenseTensor<V> tile{tile_shape, {}};
  tile.data.reserve(size_t(num_elements(tile_shape)));
  for_each_box_run(whole.shape, tile_shape, origin, [&](int64_t whole_off, int64_t, int64_t run) {
    tile.data.insert(tile.data.end(), whole.data.begin() + whole_off,
                     whole.data.begin() + whole_off + run);
  });
  return tile;
}

// `what` names the stored tensor for the error when the tile does not fit.
template <class V>
void store_tile(DenseTensor<V>& whole, const DenseTensor<V>& tile,
                const std::vector<int64_t>& origin, const std::string& what) {
  bool fits = whole.shape.size() == tile.shape.size();
  for (size_t i = 0; fits && i < origin.size(); ++i) {
    fits = origin[i] >= 0 && origin[i] + tile.shape[i] <= whole.shape[i];
  }
  if (!fits) {
    throw ir::IrError("interpret: " + what + ": tile " + ir::shape_str(tile.shape) + " stored at " +
                      ir::shape_str(origin) + " does not fit in output " +
                      ir::shape_str(whole.shape));
  }
  for_each_box_run(whole.shape, tile.shape, origin,
                   [&](int64_t whole_off, int64_t tile_off, int64_t run) {
                     std::copy(tile.data.begin() + tile_off, tile.data.begin() + tile_off + run,
                               whole.data.begin() + whole_off);
                   });
}

}  // namespace mj::interp

#pragma once
// Shape arithmetic for row-major dense tensors: sizes, strides, numpy broadcasting and
// rectangular boxes (tiles). Independent of the value domain.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cc/interp/dense_tensor.h"
#include "cc/ir/error.h"
#include "cc/ir/graph.h"

namespace mj::interp {

inline int64_t num_elements(const ir::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

inline std::vector<int64_t> row_major_strides(const ir::Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

// Product of dims [begin, end).
inline int64_t dims_product(const ir::Shape& s, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= s[i];
  return n;
}

template <class V>
DenseTensor<V> filled_tensor(const ir::Shape& shape, const V& v) {
  return DenseTensor<V>{shape, std::vector<V>(size_t(num_elements(shape)), v)};
}

// numpy broadcasting: ranks right-aligned, a size-1 dim stretches. `what` names the op.
inline ir::Shape numpy_broadcast(const ir::Shape& a, const ir::Shape& b, const std::string& what) {
  const size_t rank = std::max(a.size(), b.size());
  ir::Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw ir::IrError(what + ": shapes " + ir::shape_str(a) + " and " + ir::shape_str(b) +
                        " do not broadcast (dims must be equal or 1)");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// For every element of `out` (row-major), the flat offset of the element of a tensor of shape
// `in` that broadcasts onto it. `in` must broadcast to `out`.
inline std::vector<int64_t> broadcast_offsets(const ir::Shape& out, const ir::Shape& in) {
  const size_t rank = out.size();
  const size_t lead = rank - in.size();
  const std::vector<int64_t> in_strides = row_major_strides(in);
  std::vector<int64_t> step(rank, 0);  // input stride per output dim; 0 where stretched
  for (size_t i = lead; i < rank; ++i) {
    if (in[i - lead] != 1) step[i] = in_strides[i - lead];
  }
  std::vector<int64_t> offsets(size_t(num_elements(out)));
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (size_t flat = 0; flat < offsets.size(); ++flat) {
    offsets[flat] = off;
    for (int d = int(rank) - 1; d >= 0; --d) {  // odometer increment
      off += step[d];
      if (++idx[d] < out[d]) break;
      off -= step[d] * out[d];
      idx[d] = 0;
    }
  }
  return offsets;
}

// Calls fn(src_offset, dst_offset, run) for each contiguous run of the last dim of a box of
// shape `box`, placed at `origin` inside a tensor of shape `outer`, with the box itself dense.
// Used both to cut a tile out of a kernel tensor and to store one back.
template <class Fn>
void for_each_box_run(const ir::Shape& outer, const ir::Shape& box,
                      const std::vector<int64_t>& origin, Fn&& fn) {
  const int rank = int(outer.size());
  const std::vector<int64_t> outer_strides = row_major_strides(outer);
  const int64_t run = box[rank - 1];
  const int64_t rows = dims_product(box, 0, rank - 1);
  std::vector<int64_t> idx(rank, 0);  // index of the run's first element inside the box
  for (int64_t r = 0; r < rows; ++r) {
    int64_t outer_off = 0;
    for (int d = 0; d < rank; ++d) outer_off += (origin[d] + idx[d]) * outer_strides[d];
    fn(outer_off, r * run, run);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < box[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace mj::interp

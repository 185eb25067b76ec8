#pragma once
// How generated CUDA code names and reads tiles: every tensor's element (i0, i1, ...) is a
// float expression, whether the tile is in shared memory (in its storage dtype), read in
// place from the kernel tensor, or a concat view of other tiles. The ops are written against
// these expressions only, so where a tile lives is decided once, by the plan.
#include <string>
#include <vector>

#include "cc/codegen/common/code_writer.h"
#include "cc/codegen/cuda/cuda_plan.h"
#include "cc/ir/graph.h"

namespace mj::codegen::cuda {

// What every emitter needs.
struct Emit {
  common::CodeWriter& w;
  const ir::BlockGraph& bg;
  const CudaPlan& plan;
};

std::string str(int64_t v);
std::string tile_name(int t);           // "t12"
const char* element_type(ir::DType d);  // float, __nv_bfloat16, __half
std::vector<int64_t> dense_strides(const ir::Shape& s);
// Strides of a row-major tile whose rows are `pitch` elements apart.
std::vector<int64_t> pitched_strides(const ir::Shape& s, int64_t pitch);
// "i0 * 64 + i1" from index expressions and strides (terms of extent-1 dims dropped).
// `wide`: every term in 64-bit arithmetic, for offsets into tensors of over 2^31 elements.
std::string linear_index(const std::vector<std::string>& idx, const std::vector<int64_t>& strides,
                         const ir::Shape& shape, bool wide = false);

// Float expression for element `idx` (one index expression per dim) of tensor t.
std::string read_element(const Emit& e, int t, const std::vector<std::string>& idx);

// The statement storing float `value` as element `idx` of shared tile t (rounded once to the
// tile's element type).
std::string store_element(const Emit& e, int t, const std::vector<std::string>& idx,
                          const std::string& value);

// The address of element `idx` of shared tile t: `tN + offset`.
std::string element_address(const Emit& e, int t, const std::vector<std::string>& idx);

// The index of a numpy-broadcast operand of shape `operand` at result index `result_idx`
// (ranks right-aligned, stretched size-1 dims read index 0).
std::vector<std::string> broadcast_index(const ir::Shape& operand,
                                         const std::vector<std::string>& result_idx);

// Opens `for (int flat = threadIdx.x; flat < count(shape); flat += threads)` and declares
// the multi-index `var0, var1, ...` of `flat`; returns their names. The caller closes it.
// Shapes of over 2^31 - threads elements count in int64_t.
std::vector<std::string> open_thread_loop(const Emit& e, const ir::Shape& shape,
                                          const std::string& var, const std::string& flat);

// Declares the pointer `tN` of an input or shared tile. `stage`: the pipeline stage
// expression of a double-buffered tile; `iteration`: the for-loop iteration a tile read in
// place from the kernel tensor belongs to.
void declare_tile_pointer(const Emit& e, int t, const std::string& stage,
                          const std::string& iteration);

// The element offset of input tile `input`'s origin in its kernel tensor, for `iteration`.
std::string input_origin(const ir::BlockGraph& bg, const ir::Op& input,
                         const std::string& iteration);

}  // namespace mj::codegen::cuda

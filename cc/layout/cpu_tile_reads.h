#pragma once
// Which input tiles the generated CPU code reads where they lie in the kernel tensor, and
// which it copies into its arena first. The code generator (cc/codegen/cpu/kernel_plan.cc)
// decides by this and the cost model (cc/cost/block_graph_work.cc) prices by it, so the two
// cannot drift apart: a copy is work the core does between its arithmetic, a read in place
// is a stream the matmuls prefetch.
#include "cc/ir/graph.h"

namespace mj::layout {

// One contiguous run of the kernel tensor: every dim after the first one longer than 1 is
// whole.
bool tile_is_contiguous(const ir::Shape& tile, const ir::Shape& kernel);

// Matrices lying evenly in the kernel tensor, one kernel matrix apart: every batch dim after
// the first that is not 1 is whole there (the rows and the last dim may be cut). Such a tile
// can be read in place, each row one kernel row apart and each matrix one kernel matrix
// apart, as batched matmuls index it. Decode attention's K tile [1, 8, 128, 32] of
// [8, 8, 128, 4096] is 8 such matrices; copying it would touch every byte twice. So is a
// GQA block's V tile [2, 256, 64] of [2, 4096, 64] (both heads, a slice of the keys).
bool matrices_lie_evenly(const ir::Shape& tile, const ir::Shape& kernel);

// Every reader of tensor `t` takes it as a matmul operand, which the generated matmuls index
// with any row and matrix stride: a matmul, or an online softmax's product with it (its
// second input). False when nothing reads it.
bool only_matmuls_read(const ir::BlockGraph& bg, int t);

// Whether the generated CPU code reads the tile of block input op `input` in place: a
// float32 tile that is one contiguous run, or matrices lying evenly that only matmuls read
// (float32, or bfloat16 widened as the matmuls load it). Any other tile is copied into the
// arena (converted to float32) each time it is loaded.
bool cpu_reads_in_place(const ir::BlockGraph& bg, const ir::Op& input);

// Whether the generated CPU code streams the tile of block input op `input` as a matmul's
// weight, asking in software for the rows it reads next: a tile read in place that moves
// with the for-loop and that only matmuls read, as their second operand over more than
// kStreamedMinColumns columns (codegen/cpu/prelude.cc, matmul_rows and packed_chunk; a
// product of that many columns or fewer may take matmul_few_columns, which prefetches nothing,
// depending on the rows and the vector width the kernel is compiled for). Short runs of such a tile
// cost what their bytes do: a GEMV over 256-byte runs of its weight ran within 4% of one over 12 KB
// runs (benchmarks/gemv_tiles.py --shapes 1x4096x6144,8x4096x6144 --blocks 2,96, grid 96 against
// grid 2), where runs nothing prefetches cost tens of nanoseconds each
// (superopt/calibration.py, line runs). A copied tile's copy prefetches too
// (codegen/cpu/emit_tile_io.cc), unmeasured: its runs still count.
constexpr int64_t kStreamedMinColumns = 16;
bool cpu_streams_weight_tile(const ir::BlockGraph& bg, const ir::Op& input);

}  // namespace mj::layout

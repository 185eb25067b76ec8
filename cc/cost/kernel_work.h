#pragma once
// What one kernel asks of the machine, before any target is involved: the unit that the
// roofline (roofline.h) turns into time. A kernel graph runs as a sequence of these: XLA
// fusions and library matmuls for its predefined ops, one per customized op.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mj::cost {

enum class KernelKind : uint8_t {
  kLibraryFusion,  // predefined elementwise/reduction ops that XLA fuses into one loop
  kLibraryMatmul,  // a predefined matmul (or concat copy): one library call
  kCustomized,     // a block graph: one generated kernel over a grid of blocks
};

// A replicated input of a customized op: every block along the replicated grid axes loads
// the same tiles again. The first pass over the tensor comes from DRAM; whether the re-reads
// do is the target's call (the tensor may fit in its last-level cache).
struct ReplicatedRead {
  double tensor_bytes = 0;
  double reread_bytes = 0;  // bytes loaded beyond the first pass
};

// A stream read in pieces of rows counts in KernelWork::cut_row_bytes when it is at least
// this share of its kernel's reads.
constexpr double kMainStreamShare = 0.25;

struct KernelWork {
  KernelKind kind = KernelKind::kLibraryFusion;
  std::string label;         // for the breakdown, e.g. "fusion(rms_norm, mul)"
  double bytes_read = 0;     // everything loaded from kernel-level tensors, re-reads included
  double bytes_written = 0;  // kernel-level results, stored once
  double flops = 0;
  double low_precision_matmul_flops = 0;  // part of flops (tensor cores on a GPU)
  // kCustomized, parts of flops: products of 32 rows, columns and k or more whose B is a
  // bfloat16 input tile read in place, by how A is held (a bfloat16 tile read in place, or
  // float32): a CPU runs them on its bfloat16-weight path (Target::generated_bf16_flops).
  double bf16_weight_matmul_flops = 0;
  double f32_bf16_weight_matmul_flops = 0;
  std::vector<ReplicatedRead> replicated;  // customized only
  // kLibraryMatmul: rows of each result matrix (the library picks its algorithm by it).
  int64_t matmul_rows = 0;
  // kLibraryMatmul: the bytes of its 16-bit float operands (see Target::library_widens_16_bit).
  double bytes_16_bit_operands = 0;
  // kCustomized: grid size, and the bytes one block keeps on chip (shared memory on a GPU).
  int64_t blocks = 0;
  double working_set_bytes = 0;
  // kCustomized: the tile loads whose runs (contiguous pieces) lie on more pages than the
  // target's TLB holds, counted as (pages per load, loads over all blocks). The for-loop
  // comes back to the same pages every iteration, so when they do not all fit every run
  // pays a page walk: a [4,8,128,8] slice of K[8,8,128,4096] is 4096 runs 16 KiB apart,
  // and measured 10x slower than [1,1,128,8] slices of the same bytes.
  std::vector<std::pair<double, double>> paged_loads;
  // kCustomized: the contiguous runs of all the tiles all blocks load, in cache lines' worth:
  // a run of one line (64 bytes or less) counts 1, a longer one 64 / its bytes. On a CPU a
  // short run is a load the prefetchers did not see coming, a fixed cost besides its bytes;
  // a long one is a stream they follow. superopt/calibration.py measures a line-run's cost
  // on a weight whose rows are walked one line at a time against whole rows. Weight tiles
  // that the generated matmuls stream with prefetches of their own, in runs of 256 bytes or
  // more, are left out (layout::cpu_streams_weight_tile), and so are tiles of up to 16 rows walked
  // along them (each row a stream the prefetchers follow from one iteration to the next).
  double runs_loaded = 0;
  // kCustomized: the bytes block-level concats move inside the blocks (their results,
  // read and written, in the float32 arena), over all blocks and iterations. No flops, yet
  // the core does the copy while it does not compute: LoRA's one-kernel form, a concat of
  // W's and B's tiles before one matmul, measured 1.2-2x slower than the form with two
  // products and an add over the same tiles, which the model had costed the same.
  double on_chip_copy_bytes = 0;
  // kCustomized: the bytes of tiles that elementwise passes in the for-loop's body compute
  // from a main stream's input tile (at least kMainStreamShare of the kernel's reads) and
  // write to the arena for a matmul, and that the matmul reads back, over all blocks and
  // iterations. On a CPU the pass and the product take turns: while the matmul works from
  // the arena no stream from memory runs beside it. Decode attention scaling each [128, 256] K tile
  // before Q @ K (instead of Q's [4, 128] tile, once) ran 1.3x the time of the same kernel without,
  // which the model had costed 0.1% slower (benchmarks/ranking_replay.py).
  double arena_pass_bytes = 0;
  // The flop-equivalents a CPU's vector code spends beyond `flops` (cpu_vector_cost.h):
  // exp-based functions, divisions and square roots per element, and a row reduction's fold
  // of its vector partials per row, over all blocks and iterations. Only CPU targets count
  // them.
  double cpu_extra_flops = 0;
  // kCustomized: the bytes of input tiles that the generated CPU code copies into its arena
  // before using them (cc/layout/cpu_tile_reads.h), over all loads. Only CPU targets count
  // them: the copy is a loop of loads and stores between the core's arithmetic.
  double copied_tile_bytes = 0;
  // kCustomized: the bytes read from input tiles that the for-loop walks along the tensor's
  // innermost dim while the tile holds only part of each row (every step comes back to all
  // of the tile's rows for another piece of each), counting only tiles that are at least
  // kMainStreamShare of the kernel's reads (a GEMV's activation is walked along its k too,
  // from the cache). The model prices these bytes like any others, but the machine reads
  // them slower: tied candidates are timed least-cut first (ResultSet, Python's
  // superopt/contenders.py). GPT-2's tied logits wte[8192, 768] @ x[768, 1], 25 MB cold:
  // whole-row [128, 768] tiles ran 0.72-0.80 ms, [128, 384] walked along the rows 1.0-1.2.
  double cut_row_bytes = 0;
  // kCustomized: the block graph's matmul tiles, [m, k] @ [k, n] each, run `count` times
  // over all blocks, iterations and batch entries. A CPU's generated code lays its vectors
  // along n, or along k with a sum across the lanes per row and column when n is under a
  // vector (roofline.cc, vector_padding_flops): a [4096, 16] @ [16, 8] tile of GPT-2's tied
  // logits, walked 48 times along k, computes 8 of 16 lanes and ends every row with a tree
  // of shuffles, and ran 2.8-11 ms where the model, counting 2mnk, said 0.76.
  struct MatmulTile {
    double m = 0, k = 0, n = 0, count = 0;
    bool bf16_weight = false;  // counted in one of the *_bf16_weight_matmul_flops
  };
  std::vector<MatmulTile> matmul_tiles;
};

}  // namespace mj::cost

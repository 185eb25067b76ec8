#pragma once
// What a CPU's vector code spends on an op beyond the one flop per element that op_flops
// counts, in flop-equivalents (time at the rate of the generated kernels' matmuls, where a
// vector FMA is 2 flops a lane): exp-based functions and divisions take many instructions
// per vector, and a reduction along a row ends by folding its vector partials into one lane,
// a fixed cost per row that rows of a few hundred elements do not amortize. A CPU target
// adds these to a kernel's compute (roofline.cc); a GPU's special-function units make them
// about free there. Measured on the generated code (AVX-512, one core; 1 ns is about 100
// flops at its matmuls' rate): exp 0.39 ns an element, sigmoid and SiLU 0.46-0.48, tanh
// GELU 0.62, a division 0.10-0.18, sqrt 0.17, erf and erfc 1.2 (both branches of the
// prelude's, where libm's took 7-9); a row's max or sum about 10 ns besides 0.05-0.16 ns an element
// (loops over rows in L1, timed alone). Counting neither, the model tied an online softmax's key
// tiles of 64 and 256, whose row folds differ 4x in number.
#include <set>

#include "cc/ir/graph.h"

namespace mj::cost {

// Per element of the result, beyond op_flops' count. `generated`: the generated kernels'
// code (its erf and erfc compute both of their branches), else a library's.
double cpu_extra_element_flops(ir::OpKind kind, bool generated);

// What the generated CPU code spends on block op `op` beyond op_flops, each time it runs:
// per element for the ops above, per row and element for row reductions. An online
// softmax's accumulators over one score tile share its row max and exps: `scores_seen` holds
// the score tensors already counted (one set per block graph).
double block_op_cpu_extra_flops(const ir::BlockGraph& g, const ir::Op& op,
                                std::set<int>& scores_seen);

// A row reduction's fold of its vector partials, per row reduced.
constexpr double kRowFoldFlops = 1000;
// Per element reduced along a row, beyond the one flop counted (sums are kept in double).
constexpr double kRowElementFlops = 9;
// exp(s - max) per score of an online softmax, and the scores' row max it needs.
constexpr double kExpFlops = 40;
// Per element of B that a generated matmul with more than 8 rows of C (prelude.cc,
// packed_chunk) copies into its packed strips, once per product: a load from B's strided
// rows and a store. One [m, 256] @ [256, 4096] kernel, warm, 2 cores, B's rows 16 KB apart
// (benchmarks/ranking_replay.py's stored LoRA tiles, timed alone for m = 16 to 64): time
// = 0.13 ms + m x 0.0105 ms, the 0.13 ms being 25 flop-equivalents per element of B at
// the matmuls' rate, while 8 rows (streamed, not packed) ran at the model's time.
constexpr double kPackedElementFlops = 25;

}  // namespace mj::cost

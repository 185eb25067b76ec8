#pragma once
// The work of one customized op. With B blocks and F for-loop iterations:
//   bytes_read  = Σ over block inputs of tile bytes × (F, or 1 when fmap = -1) × B.
//                 That is the tensor's bytes × its replication (the product of the grid
//                 sizes along the axes with imap = -1): a replicated input is re-read by
//                 every block along those axes, and the re-reads are listed in `replicated`.
//   bytes_written = Σ over outputs of the kernel-level output bytes (each element once).
//   flops       = B × (F × Σ body ops and accumulators + Σ invariant and epilogue ops), with
//                 invariant ops hoisted out of the loop.
//   on_chip_copy_bytes = 2 × Σ over concats of their float32 result bytes × (F or 1) × B.
//   arena_pass_bytes = 2 × Σ over body elementwise ops that a matmul reads and that read a
//                 for-loop input tile of at least kMainStreamShare of bytes_read, of their
//                 float32 result bytes × F × B.
//   copied_tile_bytes = Σ of bytes_read's terms whose tiles the generated CPU code copies
//                 into its arena (cc/layout/cpu_tile_reads.h).
//   cut_row_bytes = Σ of bytes_read's terms whose tile the loop (F > 1) walks along the
//                 tensor's last dim, narrower than it, each at least kMainStreamShare of
//                 bytes_read.
// Tiles are read at their storage dtype; intermediates never leave the chip.
#include "cc/cost/kernel_work.h"
#include "cc/ir/graph.h"

namespace mj::cost {

KernelWork block_graph_work(const ir::BlockGraph& g);

}  // namespace mj::cost

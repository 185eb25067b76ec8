#pragma once
// The bytes one block keeps on chip: shared memory on a GPU, L1/L2-resident buffers on a CPU.
// Without a liveness analysis this is an upper bound by phase:
//   loop:     input tiles (body tiles twice when forloop_range > 1: double-buffered loads)
//             + buffered body/invariant intermediates + accumulator states;
//   epilogue: invariant input tiles + buffered invariant intermediates + accumulator
//             states + buffered epilogue intermediates;
// and the working set is the larger of the two, since the body's buffers are free again once
// the loop ends. A computed tensor needs a buffer unless thread-level fusion
// (cc/ir/thread_fusion.h) keeps it in registers: when every consumer runs in its producer's
// fusion group, or the only consumers are stores, which write straight from registers.
// Input tiles take their storage dtype; everything computed takes 4 bytes (f32 compute).
#include "cc/ir/graph.h"

namespace mj::cost {

double block_working_set_bytes(const ir::BlockGraph& g);

}  // namespace mj::cost

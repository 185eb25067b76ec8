#pragma once
// Moving tiles between the kernel tensors and the block: input tiles staged in shared memory
// with cp.async (asynchronous, so the next iteration's tiles load while this one computes),
// and output tiles stored with consecutive threads on consecutive elements (coalesced),
// converted to the output's dtype once, when they are stored.
#include <string>

#include "cc/codegen/cuda/tile_access.h"

namespace mj::codegen::cuda {

// Issues the copies of every staged input tile of one phase (`body`: fmap >= 0, else
// loop-invariant) for for-loop iteration `iteration` into pipeline stage `stage`. The caller
// commits and waits (mj_cuda::cp_async_commit / cp_async_wait).
void emit_stage_loads(const Emit& e, bool body, const std::string& iteration,
                      const std::string& stage);

void emit_output_store(const Emit& e, const Op& output);

// True when some input tile of that phase is staged in shared memory.
bool has_staged_inputs(const Emit& e, bool body);

}  // namespace mj::codegen::cuda

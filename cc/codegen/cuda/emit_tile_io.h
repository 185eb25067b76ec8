#pragma once
// Moving tiles between the kernel tensors and the block: input tiles staged in shared memory
// with cp.async (asynchronous, so the next iteration's tiles load while this one computes),
// and output tiles stored with consecutive threads on consecutive elements (coalesced),
// converted to the output's dtype once, when they are stored.
#include <cstdint>
#include <string>

#include "cc/codegen/cuda/tile_access.h"

namespace mj::codegen::cuda {

// Which staged input tiles a load covers.
enum class Staged : uint8_t {
  kInvariant,     // fmap = -1: loaded once, before the loop
  kPipelined,     // body tiles with plan.pipeline_stages stages, loaded that many - 1 ahead
  kPerIteration,  // body tiles with one stage: loaded at the start of each iteration
};

// Issues the copies of every staged input tile of `which` for for-loop iteration `iteration`
// into pipeline stage `stage`. The caller commits and waits (mj_cuda::cp_async_commit /
// cp_async_wait).
void emit_stage_loads(const Emit& e, Staged which, const std::string& iteration,
                      const std::string& stage);

// `aligned_tN`, per input tile staged with cp.async: whether its kernel tensor's base pointer
// is aligned to the copies the plan chose (else the block loads it element by element).
void emit_alignment_flags(const Emit& e);

// True when some input tile is staged that way.
bool has_staged_inputs(const Emit& e, Staged which);

void emit_output_store(const Emit& e, const ir::Op& output);

}  // namespace mj::codegen::cuda

#pragma once
// The ops the enumerators may append next: every op kind of the IR that is legal at the
// level, on every combination of existing tensors, with constants taken from the target
// (its eps and scales; a constant the target lacks cannot appear in an equivalent graph).
// Shapes and phases are not checked here; the enumerators do that before building.
#include <functional>
#include <optional>
#include <vector>

#include "cc/ir/graph.h"

namespace mj::search {

enum class Level { kKernel, kBlock };

struct ProposalOptions {
  Level level = Level::kKernel;
  bool concat = false;          // the "lora" preset
  bool online_softmax = false;  // the "attention" preset: exp-sum / exp-matmul accumulators
  int forloop_range = 1;        // accumulators only when > 1
  // Reduce max and accum_max_last, only when the target takes a max: a max is a softmax
  // stabilizer whose abstract expression is a constant (cc/absexpr/derive.h), which pruning
  // cannot reject, so without this every tensor's max would be explored. The enumerators
  // then let a max be read only as a stabilizer (stabilizers.h).
  bool max = false;
  std::vector<double> scalars;       // the target's constants
  std::vector<double> select_fills;  // the fills of the target's selects
  // Only ops reading at least one tensor with id >= this: the canonical order (op_key.h)
  // rejects every other op anyway, so they are not even proposed.
  int min_newest_input = 0;
};

// Calls f for each op (kind, inputs and attributes set; outputs empty). f sees one reused
// Op object, so proposing costs no allocation; f must copy what it keeps.
void for_each_proposal(const ir::Graph& g, const ProposalOptions& options,
                       const std::function<void(const ir::Op&)>& f);

// The result shape of appending op to g, or nullopt when the shape rules reject it, without
// building anything (a rejected build would throw, which is slow on a hot path).
std::optional<ir::Shape> proposal_shape(const ir::Graph& g, const ir::Op& op);

// Appends op through g's builders (which validate it again). Returns the new tensor id.
int append_op(ir::Graph& g, const ir::Op& op);

}  // namespace mj::search

#pragma once
// The lossless JSON form of a kernel graph, its block graphs nested inside:
//
//   {"format": "mirage_jax.kernel_graph", "version": 1, "ops": [op, ...]}
//   op:          {"kind": name, "inputs": [ids], "outputs": [ids], attributes...}
//   block graph: {"grid": [x, y, z], "forloop_range": n, "ops": [op, ...]}
//
// An op lists its kind (ops.def's name), the ids of its input tensors (not for inputs) and of
// its output tensors (not for outputs), and exactly the attributes its kind carries at its
// level: shape and dtype of a kernel input; shape (the kernel tensor's), dtype, imap and fmap
// of a block input; omap and dtype of a block output; block_graph of a customized op; scalar;
// dim; dim and reduce_kind. Reading replays the builder calls in order, so every IR rule is
// checked again and the rebuilt graph is identical: same tensor ids, same JSON, same hash.
// Tensor ids in the text only name tensors within their graph; reading renumbers them.
// Doubles are written in the shortest form that reads back to the same bits.
#include <string>
#include <string_view>

#include "cc/ir/graph.h"

namespace mj::ir {

inline constexpr std::string_view kGraphJsonFormat = "mirage_jax.kernel_graph";
inline constexpr int kGraphJsonVersion = 1;

std::string kernel_graph_to_json(const KernelGraph& g);

// IrError "from_json: <where> <problem>" for anything that is not such a document, naming the
// place ("ops[3] (customized).block_graph.ops[0] (input)") and, for a value of the wrong
// type, the argument and the value as Python would show them.
KernelGraph kernel_graph_from_json(std::string_view text);

}  // namespace mj::ir

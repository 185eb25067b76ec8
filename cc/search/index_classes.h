#pragma once
// Index classes: which tensor dims run over the same loop index of the computation. In the
// target, matmul ties A's k to B's k, elementwise ops tie aligned dims, and so on; a grid axis
// or the for-loop must split one class consistently in every tensor that has it, or the
// block would combine elements of different indices. The search derives every candidate's
// partitions from these classes instead of trying every dim of every input.
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "cc/ir/graph.h"

namespace mj::search {

constexpr int kUnitClass = -1;  // a size-1 dim: broadcast, indexes nothing

using DimClasses = std::vector<int>;  // one class id (or kUnitClass) per dim of a tensor

// Class ids with their sizes. Classes made by concat and by stores along a foreign dim are
// interned, so the same construction in two branches gets the same id.
class ClassTable {
 public:
  int fresh(int64_t size);
  int64_t size(int c) const { return sizes_.at(c); }
  int count() const { return int(sizes_.size()); }
  // The class of a concat of dims of classes a and b (sizes add up).
  int concat_of(int a, int b);
  // The class of a kernel dim holding `parts` tiles of class `tile` side by side along a
  // grid axis that splits class `axis` (a partial result per block of that axis).
  int stacked_of(int tile, int axis, int parts);
  // A stacked dim is two indices in one: which partial (the chunk) and where in the tile.
  // `chunks` is the class of the chunk index, shared by every stack made by the same split
  // (axis, parts), so a later kernel can walk the partial sums and the partial row sums of
  // one split together, chunk by chunk, each chunk a tile of class `tile` again.
  struct Stacking {
    int tile = kUnitClass;
    int chunks = kUnitClass;
    int parts = 1;
  };
  // The stacking of class c, or nullptr when c is not a stack of partial results.
  const Stacking* stacking(int c) const;

 private:
  std::vector<int64_t> sizes_;
  std::map<std::pair<int, int>, int> concat_;
  std::map<std::tuple<int, int, int>, int> stacked_;
  std::map<std::pair<int, int>, int> chunks_;  // (axis, parts) -> chunk class
  std::map<int, Stacking> stackings_;          // stacked class -> its two indices
};

// The classes of the target's tensors: its inputs' classes start every search graph.
struct TargetClasses {
  ClassTable table;
  std::vector<DimClasses> inputs;   // per kernel input, in order
  std::vector<DimClasses> outputs;  // per marked output, in order
  // The classes the target takes a max over: a stabilizer only cancels in a softmax over
  // the same index (stabilizers.h).
  std::vector<int> max_reduced;
  // The reduced classes whose partial sums a later kernel can add up: those the outputs sum
  // over outside every nonlinear op (a sum inside exp(...) cannot be completed after the
  // exp). Found by walking back from the outputs through the linear ops and the products
  // and quotients (whose operands a combining kernel sums before it multiplies).
  std::vector<int> combinable;
};
TargetClasses target_classes(const ir::KernelGraph& target);

// The result classes of appending `op` (with the given input classes) to a graph, or nullopt
// when the op would tie two different classes (an elementwise op on unrelated indices, a
// matmul whose k dims differ): no equivalent program does that unless the target did, and
// then the target tied them. `out_shape` is the op's result shape. Accumulators over the
// last dim make it a unit; kInput/kOutput/kCustomized are handled by the enumerators. `table` may
// be null except for concat, whose result dim is a new class.
std::optional<DimClasses> propagate_classes(const ir::Op& op, const std::vector<DimClasses>& in,
                                            const ir::Shape& out_shape, ClassTable* table);

}  // namespace mj::search

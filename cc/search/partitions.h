#pragma once
// Candidate grids, imaps, fmaps, for-loop ranges and omaps, derived from the shapes of a
// block graph's inputs and the machine, never from a list of answers (unless the caller
// fixes grids or maps in the config: user_structure.h keeps only those):
//  * a grid axis splits one index class (index_classes.h) into a divisor of its size, in
//    every input that has that index; the grid's total block count should fill the target's
//    parallel units (cores or SMs) in few, full waves;
//  * the for-loop walks one index class in a divisor of its per-block size, chosen so that
//    one iteration's input tiles fit the block's on-chip budget;
//  * an output stores along the dim of the index its grid axis splits. Under the
//    "attention" preset an axis that splits an index the output no longer has (a reduction
//    split across blocks) stores its partial results side by side along another dim, for a
//    later kernel to combine (along the last free dim: any other dim holds the same
//    partials permuted). Such a stack is walked by a later kernel's loop one chunk (one
//    partial) per iteration, every stack of the same split in step (ClassTable::Stacking).
#include <array>
#include <vector>

#include "cc/ir/graph.h"
#include "cc/search/config.h"
#include "cc/search/index_classes.h"

namespace mj::search {

constexpr int kNoClass = -2;  // a grid axis or loop that splits nothing

struct BlockInputSpec {
  ir::Shape shape;
  ir::DType dtype = ir::DType::kF32;
  DimClasses classes;
  // A second read of a tensor that another input of the block graph reads tile by tile:
  // this one is held whole before the loop (fmap -1), so that a statistic over the walked
  // index (a LayerNorm's mean) is known before the first iteration uses it. A layout whose
  // loop walks none of its dims would make it the same tile as the other read: none is made.
  bool whole = false;
};

struct BlockLayout {
  ir::Dim3 grid{1, 1, 1};
  std::array<int, 3> axis_class{kNoClass, kNoClass, kNoClass};
  int forloop_range = 1;
  int loop_class = kNoClass;
  std::vector<ir::Dim3> imaps;  // per input
  std::vector<int> fmaps;       // per input
};

// Whether the preset lets grids split an index that the target's outputs do not have.
bool preset_splits_reductions(const SearchConfig& config);

// Whether a block graph opened after `kernel_ops` kernel ops may store partial results:
// the preset allows them, and a later kernel op is left to combine them.
bool partials_allowed(const SearchConfig& config, int kernel_ops);

// Whether a grid axis of the layout splits an index the target's outputs do not have, so
// that the block graph can only store partial results.
bool splits_reduced_index(const BlockLayout& layout, const std::vector<int>& output_classes);

// Every layout for these inputs, in a deterministic order. `output_classes` are the index
// classes of the target's outputs (the indices a grid can split without partial results);
// the reduced indices in `combinable` (TargetClasses::combinable) are split only when
// `partials`.
std::vector<BlockLayout> block_layouts(const std::vector<BlockInputSpec>& inputs,
                                       const std::vector<int>& output_classes,
                                       const ClassTable& table, const SearchConfig& config,
                                       bool partials, const std::vector<int>& combinable = {});

// The omaps that store a tile with these classes (empty: it cannot be stored). A foreign
// dim (partial results) is allowed only when allow_partials.
std::vector<ir::Dim3> output_omaps(const BlockLayout& layout, const DimClasses& tile_classes,
                                   bool allow_partials);

}  // namespace mj::search

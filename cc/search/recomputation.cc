#include "cc/search/recomputation.h"

#include "cc/search/partitions.h"

namespace mj::search {

using absexpr::ExprId;

bool dedupes_values(const SearchConfig& config) { return preset_splits_reductions(config); }

bool recomputes_existing(const std::vector<TensorFacts>& facts, ExprId expr,
                         const DimClasses& classes, Pruner& pruner) {
  if (!pruner.enabled()) return false;
  for (const TensorFacts& f : facts) {
    if (f.classes == classes && pruner.same_value(f.expr, expr)) return true;
  }
  return false;
}

}  // namespace mj::search

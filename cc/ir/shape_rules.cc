#include "cc/ir/shape_rules.h"

#include <algorithm>

namespace mj::ir {

void ir_fail(const std::string& op, const std::string& message) {
  throw IrError(op + ": " + message);
}

std::string tensor_desc(const Graph& g, int id) {
  return "t" + std::to_string(id) + " " + shape_str(g.tensor(id).shape);
}

void check_valid_shape(const std::string& op, const std::string& what, const Shape& s) {
  if (s.empty() || int(s.size()) > kMaxRank) {
    ir_fail(op, what + " " + shape_str(s) + " has rank " + std::to_string(s.size()) +
                    "; tensors must have rank 1.." + std::to_string(kMaxRank));
  }
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] < 1) {
      ir_fail(op, what + " " + shape_str(s) + " has dim " + std::to_string(d) + " of size " +
                      std::to_string(s[d]) + "; every dim must be >= 1");
    }
  }
}

Shape broadcast_shapes(const std::string& op, const std::string& a_desc, const Shape& a,
                       const std::string& b_desc, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {  // i counts from the right
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      ir_fail(op, "shapes do not broadcast: " + a_desc + " and " + b_desc + " differ at dim " +
                      std::to_string(int(rank - 1 - i)) + " of the result (" + std::to_string(da) +
                      " vs " + std::to_string(db) + ", and neither is 1)");
    }
    out[rank - 1 - i] = std::max(da, db);
  }
  return out;
}

Shape matmul_shape(const std::string& op, const std::string& a_desc, const Shape& a,
                   const std::string& b_desc, const Shape& b) {
  if (a.size() < 2 || b.size() < 2) {
    ir_fail(op, "both operands need rank >= 2, got " + a_desc + " and " + b_desc);
  }
  const int64_t m = a[a.size() - 2], k = a.back(), kb = b[b.size() - 2], n = b.back();
  if (k != kb) {
    ir_fail(op, "inner dims differ: " + a_desc + " @ " + b_desc + " (k " + std::to_string(k) +
                    " vs " + std::to_string(kb) + ")");
  }
  const Shape a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  // Missing batch dims broadcast like size-1 ones (an empty shape is all 1s here).
  Shape out = broadcast_shapes(op + " (batch dims)", a_desc, a_batch, b_desc, b_batch);
  out.push_back(m);
  out.push_back(n);
  return out;
}

int normalize_dim(const std::string& op, const std::string& x_desc, int rank, int dim) {
  if (dim < -rank || dim >= rank) {
    ir_fail(op, "dim " + std::to_string(dim) + " is out of range for " + x_desc + " (rank " +
                    std::to_string(rank) + ")");
  }
  return dim < 0 ? dim + rank : dim;
}

Shape reduced_shape(const Shape& x, int dim) {
  Shape out = x;
  out[dim] = 1;
  return out;
}

Shape concat_shape(const std::string& op, const std::string& a_desc, const Shape& a,
                   const std::string& b_desc, const Shape& b, int dim) {
  if (a.size() != b.size()) {
    ir_fail(op, "operands must have equal rank, got " + a_desc + " and " + b_desc);
  }
  Shape out = a;
  for (size_t d = 0; d < a.size(); ++d) {
    if (int(d) == dim) {
      out[d] = a[d] + b[d];
    } else if (a[d] != b[d]) {
      ir_fail(op, "dim " + std::to_string(d) + " differs between " + a_desc + " and " + b_desc +
                      " (only the concat dim " + std::to_string(dim) + " may differ)");
    }
  }
  return out;
}

}  // namespace mj::ir

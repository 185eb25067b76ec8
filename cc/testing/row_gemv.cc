#include "cc/testing/row_gemv.h"

namespace mj::testing {

using ir::BlockGraph;
using ir::Dim3;
using ir::DType;
using ir::KernelGraph;
using ir::OpKind;

std::shared_ptr<BlockGraph> row_gemv_block(int forloop) {
  auto bg = std::make_shared<BlockGraph>(Dim3{4, 1, 1}, forloop);
  const int w = bg->new_input({256, 64}, DType::kF32, {0, -1, -1}, forloop > 1 ? 1 : -1);
  const int x = bg->new_input({64, 1}, DType::kF32, {-1, -1, -1}, forloop > 1 ? 0 : -1);
  const int product = bg->matmul(w, x);
  bg->new_output(forloop > 1 ? bg->accum(OpKind::kAccumSum, product) : product, {0, -1, -1},
                 DType::kF32);
  return bg;
}

std::shared_ptr<const KernelGraph> row_gemv(int forloop) {
  auto g = std::make_shared<KernelGraph>();
  const int w = g->new_input({256, 64}, DType::kF32);
  const int x = g->new_input({64, 1}, DType::kF32);
  g->mark_output(g->customized({w, x}, row_gemv_block(forloop)).at(0));
  return g;
}

}  // namespace mj::testing

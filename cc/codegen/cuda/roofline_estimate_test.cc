// The static roofline estimate of a CUDA plan: what bounds a kernel (memory or compute),
// the share of the GPU its grid keeps busy, and the loss that leaves.
#include "cc/codegen/cuda/roofline_estimate.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "cc/ir/op_kind.h"

namespace mj::codegen::cuda {
namespace {

using ir::BlockGraph;
using ir::DType;
using ir::OpKind;

// Y[8, n] = X[8, 4096] @ W[4096, n], columns over `blocks` blocks, k over 32 iterations: a
// decode-shaped GEMV, memory-bound.
BlockGraph gemv(int64_t blocks, int64_t n, DType dtype) {
  BlockGraph bg({int(blocks), 1, 1}, 32);
  const int x = bg.new_input({8, 4096}, dtype, {-1, -1, -1}, 1);
  const int w = bg.new_input({4096, n}, dtype, {1, -1, -1}, 0);
  bg.new_output(bg.accum(OpKind::kAccumSum, bg.matmul(x, w)), {1, -1, -1}, dtype);
  return bg;
}

TEST(CudaRoofline, AGridSmallerThanTheGpuLeavesSmsIdle) {
  const cost::Target h100 = gpu_target("h100");
  const BlockGraph few = gemv(33, 33 * 64, DType::kBF16);
  const CudaKernelEstimate e = estimate_cuda_kernel(few, plan_cuda_kernel(few, 227 << 10), h100);
  EXPECT_EQ(e.bound, "memory");
  EXPECT_DOUBLE_EQ(e.wave_efficiency, 33.0 / 132.0);
  EXPECT_GT(e.tensor_flops, 0.99 * e.flops * 0.9);
  EXPECT_LT(e.share, 1.0);
  // Four times the blocks over the same bytes per block: the whole GPU, a larger share.
  const BlockGraph many = gemv(132, 132 * 64, DType::kBF16);
  const CudaKernelEstimate f =
      estimate_cuda_kernel(many, plan_cuda_kernel(many, 227 << 10), h100);
  EXPECT_DOUBLE_EQ(f.wave_efficiency, 1.0);
  EXPECT_GT(f.share, e.share);
  EXPECT_LE(f.share, 1.0);
  EXPECT_NE(f.text().find("of roofline"), std::string::npos);
}

TEST(CudaRoofline, H200IsTheSameDieWithFasterMemory) {
  const BlockGraph bg = gemv(132, 132 * 64, DType::kBF16);
  const CudaPlan plan = plan_cuda_kernel(bg, 227 << 10);
  const CudaKernelEstimate h100 = estimate_cuda_kernel(bg, plan, gpu_target("h100"));
  const CudaKernelEstimate h200 = estimate_cuda_kernel(bg, plan, gpu_target("h200"));
  EXPECT_LT(h200.roofline_s, h100.roofline_s);
  EXPECT_EQ(h200.resident_blocks, h100.resident_blocks);
  EXPECT_THROW(gpu_target("v100"), std::invalid_argument);
}

}  // namespace
}  // namespace mj::codegen::cuda

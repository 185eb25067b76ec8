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

TEST(CudaRoofline, AGridSmallerThanTheGpuLeavesSmsIdleUnlessSplitK) {
  const cost::Target h100 = gpu_target("h100");
  const BlockGraph few = gemv(33, 33 * 64, DType::kBF16);
  CudaOptions unsplit;
  unsplit.smem_limit = 227 << 10;
  unsplit.sm_count = 1;  // a GPU this grid fills: no split
  const CudaPlan one = plan_cuda_kernel(few, unsplit);
  EXPECT_EQ(one.split_k, 1);
  const CudaKernelEstimate e = estimate_cuda_kernel(few, one, h100);
  EXPECT_EQ(e.bound, "memory");
  EXPECT_DOUBLE_EQ(e.wave_efficiency, 33.0 / 132.0);
  EXPECT_GT(e.tensor_flops, 0.9 * e.flops);
  EXPECT_LT(e.share, 1.0);
  // For 132 SMs the loop splits over 4 blocks per output tile: the whole GPU.
  const CudaPlan split = plan_cuda_kernel(few, 227 << 10);
  EXPECT_EQ(split.split_k, 4);
  const CudaKernelEstimate f = estimate_cuda_kernel(few, split, h100);
  EXPECT_EQ(f.blocks, 132);
  EXPECT_DOUBLE_EQ(f.wave_efficiency, 1.0);
  EXPECT_GT(f.share, e.share);
  EXPECT_LE(f.share, 1.0);
  EXPECT_NE(f.text().find("(split-K 4)"), std::string::npos);
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

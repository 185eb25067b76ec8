// What the CUDA generator decides before writing code: where tiles live, the shared-memory
// layout and its limit, cp.async widths, and the code that follows from them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "cc/codegen/cuda/cuda_plan.h"
#include "cc/codegen/cuda/generate.h"
#include "cc/ir/error.h"

namespace mj::codegen::cuda {

using ir::BlockGraph;
using ir::DType;
using ir::IrError;
using ir::OpKind;

namespace {

constexpr int64_t kLimit = 163 * 1024;

// Plans for a GPU every grid here fills (one SM): no split-K, unless a test asks for it.
CudaOptions unsplit(int64_t limit = kLimit) {
  CudaOptions options;
  options.smem_limit = limit;
  options.sm_count = 1;
  return options;
}
CudaPlan plan_for(const BlockGraph& bg, int64_t limit = kLimit) {
  return plan_cuda_kernel(bg, unsplit(limit));
}
std::string generate(const BlockGraph& bg, const std::string& symbol) {
  return generate_cuda_kernel(bg, symbol, unsplit());
}

// rms_norm(X)·g @ W with the norm divided out in the epilogue, as the paper fuses it.
struct RmsNormLinear {
  BlockGraph bg;
  int x, g, w, mm, acc, out;
  explicit RmsNormLinear(DType dtype, int64_t k = 64, int64_t n = 48, int forloop = 4)
      : bg({3, 1, 1}, forloop) {
    x = bg.new_input({16, k}, dtype, {-1, -1, -1}, 1);
    g = bg.new_input({k}, dtype, {-1, -1, -1}, 0);
    w = bg.new_input({k, n}, dtype, {1, -1, -1}, 0);
    mm = bg.matmul(bg.binary(OpKind::kMul, x, g), w);
    acc = bg.accum(OpKind::kAccumSum, mm);
    const int mean_sq = bg.accum(OpKind::kAccumMeanLast, bg.unary(OpKind::kSquare, x));
    const int rms = bg.unary(OpKind::kSqrt, bg.unary(OpKind::kAddScalar, mean_sq, 1e-6));
    out = bg.binary(OpKind::kDiv, acc, rms);
    bg.new_output(out, {1, -1, -1}, dtype);
  }
};

TEST(CudaPlan, BodyInputTilesArePipelinedInTheirStorageDtype) {
  RmsNormLinear f(DType::kBF16);
  const CudaPlan plan = plan_for(f.bg);
  EXPECT_EQ(plan.pipeline_stages, 4);  // 4 iterations, and room for 4 stages
  for (int t : {f.x, f.g, f.w}) {
    EXPECT_EQ(plan.tiles[t].storage, Storage::kShared) << "t" << t;
    EXPECT_EQ(plan.tiles[t].stages, 4) << "t" << t;
    EXPECT_EQ(plan.tiles[t].element, DType::kBF16) << "t" << t;
  }
  // k tile 64 / 4 iterations = 16 bf16 (32 bytes) a row: padded by 16 bytes to 24.
  EXPECT_EQ(plan.tiles[f.x].pitch, 24);
  EXPECT_EQ(plan.tiles[f.x].bytes, 16 * 24 * 2);
  EXPECT_EQ(plan.tiles[f.g].pitch, 16);  // one row: nothing to conflict with
  // Computed tiles are f32. The matmul adds into its accumulator and owns no tile.
  EXPECT_EQ(plan.matmul_adds_into[f.bg.tensor(f.mm).producer], f.acc);
  EXPECT_EQ(plan.tiles[f.mm].storage, Storage::kRegister);
  EXPECT_EQ(plan.tiles[f.acc].element, DType::kF32);
  EXPECT_EQ(plan.tiles[f.acc].bytes, 16 * 16 * 4);  // n 48 over a grid of 3
  EXPECT_EQ(plan.tiles[f.out].storage, Storage::kShared);
}

TEST(CudaPlan, AMatmulHeadingAnElementwiseChainKeepsItsProductsInRegisters) {
  // s = (q @ k) * scale, as attention scales its scores: one pass, the product never stored.
  BlockGraph bg({1, 1, 1}, 2);
  const int q = bg.new_input({16, 16}, DType::kBF16, {-1, -1, -1}, -1);
  const int k = bg.new_input({16, 64}, DType::kBF16, {-1, -1, -1}, 1);
  const int s = bg.matmul(q, k);
  const int scaled = bg.unary(OpKind::kMulScalar, s, 0.25);
  bg.new_output(bg.accum(OpKind::kAccumMaxLast, scaled), {-1, -1, -1}, DType::kF32);
  const CudaPlan plan = plan_for(bg);
  EXPECT_EQ(plan.tiles[s].storage, Storage::kRegister);
  EXPECT_EQ(plan.tiles[scaled].storage, Storage::kShared);
  const std::vector<int> pass{bg.tensor(s).producer, bg.tensor(scaled).producer};
  EXPECT_EQ(plan.pass_ending_at[bg.tensor(scaled).producer], pass);
}

TEST(CudaPlan, PipelinesAreAsDeepAsTheLoopAndLeaveRoomForASecondBlock) {
  // Two iterations: two stages. Eight: four while the block fits in half the limit, three
  // or two when it does not.
  RmsNormLinear two(DType::kBF16, 64, 48, /*forloop=*/2);
  EXPECT_EQ(plan_for(two.bg).pipeline_stages, 2);
  RmsNormLinear eight(DType::kF32, 512, 48, /*forloop=*/8);
  const CudaPlan roomy = plan_for(eight.bg);
  EXPECT_EQ(roomy.pipeline_stages, 4);
  EXPECT_LE(roomy.smem_bytes, kLimit / 2);
  const CudaPlan tight = plan_for(eight.bg, 2 * roomy.smem_bytes - 1);
  EXPECT_LT(tight.pipeline_stages, 4);
  EXPECT_GE(tight.pipeline_stages, 2);
  EXPECT_LE(tight.smem_bytes, roomy.smem_bytes - 1);
}

TEST(CudaPlan, RowsThatAreMultiplesOf32BytesArePaddedBy16) {
  // 64 bf16 = 128 bytes a row: without padding 8 rows start in the same bank.
  BlockGraph bg({1, 1, 1}, 1);
  const int x = bg.new_input({32, 64}, DType::kBF16, {-1, -1, -1}, -1);
  const int y = bg.new_input({32, 40}, DType::kBF16, {-1, -1, -1}, -1);  // 80 bytes: fine
  const int z = bg.new_input({32, 8}, DType::kF32, {-1, -1, -1}, -1);    // 32 bytes
  bg.new_output(bg.unary(OpKind::kExp, x), {-1, -1, -1}, DType::kBF16);
  bg.new_output(bg.unary(OpKind::kExp, y), {-1, -1, -1}, DType::kBF16);
  bg.new_output(bg.unary(OpKind::kExp, z), {-1, -1, -1}, DType::kF32);
  const CudaPlan plan = plan_for(bg);
  EXPECT_EQ(plan.tiles[x].pitch, 72);
  EXPECT_EQ(plan.tiles[y].pitch, 40);
  EXPECT_EQ(plan.tiles[z].pitch, 12);
}

TEST(CudaPlan, SixteenBitOperandsUseLdmatrixAndComputedOperandsStay16Bit) {
  RmsNormLinear f(DType::kBF16);
  const CudaPlan plan = plan_for(f.bg);
  const int mm = f.bg.tensor(f.mm).producer;
  EXPECT_EQ(plan.matmuls[mm].path, MatmulPath::kMma16);
  // A is x * g, read only by the tensor cores: stored as the bf16 mma.sync rounds it to.
  const int a = f.bg.ops()[mm].inputs[0];
  EXPECT_EQ(plan.tiles[a].storage, Storage::kShared);
  EXPECT_EQ(plan.tiles[a].element, DType::kBF16);
  EXPECT_TRUE(plan.matmuls[mm].ldmatrix_a);
  EXPECT_TRUE(plan.matmuls[mm].ldmatrix_b);
  // The sum it adds into stays in registers across the loop.
  EXPECT_TRUE(plan.matmuls[mm].registers);
  const std::string src = generate(f.bg, "k");
  EXPECT_NE(src.find("mj_cuda::ldsm_x4("), std::string::npos);
  EXPECT_NE(src.find("mj_cuda::ldsm_x2_trans("), std::string::npos);
  // The same tile in f32 (no tensor cores): f32 everywhere, element reads.
  RmsNormLinear f32(DType::kF32);
  const CudaPlan p32 = plan_for(f32.bg);
  EXPECT_EQ(p32.matmuls[mm].path, MatmulPath::kFma);
  EXPECT_EQ(p32.tiles[a].element, DType::kF32);
}

TEST(CudaPlan, F32MatmulsUseTf32TensorCoresOnlyWhenAllowed) {
  RmsNormLinear f(DType::kF32);
  const int mm = f.bg.tensor(f.mm).producer;
  CudaOptions options = unsplit();
  EXPECT_EQ(plan_cuda_kernel(f.bg, options).matmuls[mm].path, MatmulPath::kFma);
  options.allow_tf32 = true;
  const CudaPlan plan = plan_cuda_kernel(f.bg, options);
  EXPECT_EQ(plan.matmuls[mm].path, MatmulPath::kMmaTf32);
  EXPECT_TRUE(plan.matmuls[mm].ldmatrix_a);   // f32 rows of 16 bytes: ldmatrix works
  EXPECT_FALSE(plan.matmuls[mm].ldmatrix_b);  // a transpose would split the floats
  const std::string src = generate_cuda_kernel(f.bg, "k", options);
  EXPECT_NE(src.find("mj_cuda::mma_m16n8k8_tf32("), std::string::npos);
  EXPECT_EQ(generate(f.bg, "k").find("mj_cuda::mma_m16n8k8_tf32("), std::string::npos);
}

TEST(CudaPlan, OnlineSoftmaxStateStaysInRegisters) {
  // softmax(q @ k) @ v over 4 iterations, 16-bit: the probabilities are a bf16 tile.
  BlockGraph bg({1, 1, 1}, 4);
  const int q = bg.new_input({32, 16}, DType::kBF16, {-1, -1, -1}, -1);
  const int k = bg.new_input({16, 256}, DType::kBF16, {-1, -1, -1}, 1);
  const int v = bg.new_input({256, 16}, DType::kBF16, {-1, -1, -1}, 0);
  const int s = bg.matmul(q, k);
  const int ev = bg.accum_exp_matmul(s, v);
  const int sum = bg.accum(OpKind::kAccumExpSumLast, s);
  bg.new_output(bg.binary(OpKind::kDiv, ev, sum), {-1, -1, -1}, DType::kBF16);
  const CudaPlan plan = plan_for(bg);
  ASSERT_EQ(plan.softmax_groups.size(), 1u);
  const SoftmaxGroup& g = plan.softmax_groups[0];
  EXPECT_EQ(g.probs, DType::kBF16);
  EXPECT_TRUE(g.registers);
  EXPECT_EQ(g.rows_per_warp, 8);  // 32 rows over 4 warps
  const int product = bg.tensor(ev).producer;
  EXPECT_EQ(plan.matmuls[product].path, MatmulPath::kMma16);
  EXPECT_TRUE(plan.matmuls[product].ldmatrix_a);
  EXPECT_TRUE(plan.matmuls[product].registers);
  const std::string src = generate(bg, "k");
  EXPECT_NE(src.find("float smax0[8]"), std::string::npos);
  EXPECT_NE(src.find("*= scale_a"), std::string::npos);
}

TEST(CudaPlan, SmallGridsSplitTheirLoopOverMoreBlocks) {
  // 3 blocks of a 4-iteration loop: for 132 SMs each output tile's loop is split over 4
  // blocks (one iteration each), for 8 SMs over 2; a grid that fills the GPU is not split.
  RmsNormLinear f(DType::kBF16);
  CudaOptions options;
  options.smem_limit = kLimit;
  EXPECT_EQ(plan_cuda_kernel(f.bg, options).split_k, 4);
  EXPECT_EQ(plan_cuda_kernel(f.bg, options).workspace_floats, 16 * 16 + 16);  // acc, mean
  options.sm_count = 8;
  EXPECT_EQ(plan_cuda_kernel(f.bg, options).split_k, 2);
  options.sm_count = 4;
  EXPECT_EQ(plan_cuda_kernel(f.bg, options).split_k, 1);
  // Two kernels, XLA scratch for the partial sums, and so no command-buffer trait.
  options.sm_count = 132;
  const std::string src = generate_cuda_kernel(f.bg, "k", options);
  EXPECT_NE(src.find("kernel_partial(const Io io)"), std::string::npos);
  EXPECT_NE(src.find("kernel_finish(const Io io)"), std::string::npos);
  EXPECT_NE(src.find(".Ctx<xla::ffi::ScratchAllocator>()"), std::string::npos);
  EXPECT_EQ(src.find("kCmdBufferCompatible}"), std::string::npos);
}

TEST(CudaPlan, OnlineSoftmaxLoopsAreNotSplit) {
  // The exp-sums and products are rescaled by the running max: not a plain sum of splits.
  BlockGraph bg({1, 1, 1}, 4);
  const int q = bg.new_input({16, 16}, DType::kBF16, {-1, -1, -1}, -1);
  const int k = bg.new_input({16, 64}, DType::kBF16, {-1, -1, -1}, 1);
  bg.new_output(bg.accum(OpKind::kAccumExpSumLast, bg.matmul(q, k)), {-1, -1, -1}, DType::kF32);
  EXPECT_EQ(plan_cuda_kernel(bg, kLimit).split_k, 1);
}

TEST(CudaPlan, SingleIterationTilesAreNotDoubleBuffered) {
  RmsNormLinear f(DType::kF32, 64, 48, /*forloop=*/1);
  const CudaPlan plan = plan_for(f.bg);
  EXPECT_EQ(plan.tiles[f.x].stages, 1);
  EXPECT_EQ(plan.tiles[f.w].stages, 1);
}

TEST(CudaPlan, SharedTilesAreAlignedDisjointAndCounted) {
  RmsNormLinear f(DType::kF32);
  const CudaPlan plan = plan_for(f.bg);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const TilePlan& t : plan.tiles) {
    if (t.storage != Storage::kShared) continue;
    EXPECT_EQ(t.offset % 16, 0);
    spans.emplace_back(t.offset, t.offset + t.bytes * t.stages);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].second, spans[i].first);
  EXPECT_GE(plan.smem_bytes, spans.back().second);
  EXPECT_LE(plan.smem_bytes, kLimit);
}

TEST(CudaPlan, CopyWidthIsTheWidestEveryRowIsAlignedTo) {
  // f32 rows of 16 floats whose starts are multiples of 16 floats: 16-byte copies.
  RmsNormLinear f32(DType::kF32);
  EXPECT_EQ(plan_for(f32.bg).tiles[f32.x].copy_bytes, 16);
  // bf16 rows of 4 elements (8 bytes): 8-byte copies.
  RmsNormLinear bf16(DType::kBF16, 16, 48);
  EXPECT_EQ(plan_for(bf16.bg).tiles[bf16.x].copy_bytes, 8);
  // bf16 rows of 3 elements (6 bytes) cannot use cp.async at all.
  BlockGraph odd({1, 1, 1}, 1);
  const int x = odd.new_input({4, 3}, DType::kBF16, {-1, -1, -1}, -1);
  odd.new_output(odd.unary(OpKind::kExp, x), {-1, -1, -1}, DType::kBF16);
  EXPECT_EQ(plan_for(odd).tiles[x].copy_bytes, 0);
}

TEST(CudaPlan, InputTilesThatDoNotFitAreReadFromGlobalMemory) {
  // W's tile, 1024x64 f32 = 256 KiB even with one stage: over the limit, so it is read in
  // place; the small tile stays staged.
  BlockGraph bg({2, 1, 1}, 2);
  const int x = bg.new_input({8, 2048}, DType::kF32, {-1, -1, -1}, 1);
  const int w = bg.new_input({2048, 128}, DType::kF32, {1, -1, -1}, 0);
  const int acc = bg.accum(OpKind::kAccumSum, bg.matmul(x, w));
  bg.new_output(acc, {1, -1, -1}, DType::kF32);
  const CudaPlan plan = plan_for(bg);
  EXPECT_EQ(plan.tiles[w].storage, Storage::kGlobal);
  EXPECT_EQ(plan.tiles[x].storage, Storage::kShared);
  EXPECT_LE(plan.smem_bytes, kLimit);
}

TEST(CudaPlan, DoubleBufferingIsGivenUpBeforeStaging) {
  // Two 32 KiB body tiles (plus padding), double-buffered: 130 KiB, plus a 16 KiB
  // accumulator. Under a 100 KiB limit both keep one stage in shared memory rather than one
  // leaving it.
  BlockGraph bg({1, 1, 1}, 2);
  const int a = bg.new_input({64, 256}, DType::kF32, {-1, -1, -1}, 1);
  const int b = bg.new_input({256, 64}, DType::kF32, {-1, -1, -1}, 0);
  bg.new_output(bg.accum(OpKind::kAccumSum, bg.matmul(a, b)), {-1, -1, -1}, DType::kF32);
  const CudaPlan roomy = plan_for(bg, 2 * kLimit);
  EXPECT_EQ(roomy.tiles[a].stages, 2);
  EXPECT_EQ(roomy.tiles[b].stages, 2);
  const CudaPlan tight = plan_for(bg, 100 * 1024);
  for (int t : {a, b}) {
    EXPECT_EQ(tight.tiles[t].storage, Storage::kShared) << "t" << t;
    EXPECT_EQ(tight.tiles[t].stages, 1) << "t" << t;
  }
  EXPECT_LE(tight.smem_bytes, 100 * 1024);
}

TEST(CudaPlan, ComputedTilesOverTheLimitAreRefusedNamingBytesAndLimit) {
  // A 256x256 f32 matmul result is 256 KiB of computed tile: no demotion can help.
  BlockGraph bg({1, 1, 1}, 1);
  const int a = bg.new_input({256, 8}, DType::kF32, {-1, -1, -1}, -1);
  const int b = bg.new_input({8, 256}, DType::kF32, {-1, -1, -1}, -1);
  bg.new_output(bg.matmul(a, b), {-1, -1, -1}, DType::kF32);
  try {
    plan_for(bg);
    FAIL() << "expected IrError";
  } catch (const IrError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("262144 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(kLimit) + " bytes"), std::string::npos) << msg;
  }
}

TEST(CudaPlan, SharedMemoryLimitsPerArchitecture) {
  EXPECT_EQ(shared_memory_limit("80"), 163 * 1024);
  EXPECT_EQ(shared_memory_limit("90a"), 227 * 1024);
  EXPECT_EQ(shared_memory_limit("86"), 99 * 1024);
}

TEST(CudaGenerate, Bf16MatmulsUseTensorCoresAndF32MatmulsFma) {
  RmsNormLinear bf16(DType::kBF16);
  const std::string symbol = cuda_kernel_symbol(bf16.bg);
  EXPECT_EQ(symbol.rfind("mj_cuda_", 0), 0u);
  const std::string src = generate(bf16.bg, symbol);
  EXPECT_NE(src.find("mj_cuda::mma_m16n8k16<__nv_bfloat16>"), std::string::npos);
  EXPECT_NE(src.find("mj_cuda::cp_async<"), std::string::npos);
  EXPECT_NE(src.find("xla::ffi::PlatformStream<cudaStream_t>"), std::string::npos);
  EXPECT_NE(src.find("XLA_FFI_DEFINE_HANDLER_SYMBOL(" + symbol), std::string::npos);
  RmsNormLinear f32(DType::kF32);
  const std::string f32_src = generate(f32.bg, cuda_kernel_symbol(f32.bg));
  EXPECT_EQ(f32_src.find("mj_cuda::mma_m16n8k16<"), std::string::npos);
  EXPECT_NE(f32_src.find("fmaf("), std::string::npos);
}

TEST(CudaGenerate, TheHandlerLaunchesWithItsOwnErrorAndIsGraphSafe) {
  RmsNormLinear f(DType::kBF16);
  const std::string src = generate(f.bg, "mj_cuda_x");
  // The launch's own error, not whatever cudaGetLastError holds from before.
  EXPECT_NE(src.find("cudaLaunchKernel("), std::string::npos);
  EXPECT_EQ(src.find("<<<"), std::string::npos);
  // XLA may record it into command buffers.
  EXPECT_NE(src.find("{xla::ffi::Traits::kCmdBufferCompatible}"), std::string::npos);
  // Checked per device before the first launch, and exported for the check at load.
  EXPECT_NE(src.find(".Ctx<xla::ffi::DeviceOrdinal>()"), std::string::npos);
  EXPECT_NE(src.find("int mj_cuda_x_check(int device, char* message, int size)"),
            std::string::npos);
  EXPECT_NE(src.find("cudaDevAttrMaxSharedMemoryPerBlockOptin"), std::string::npos);
}

TEST(CudaGenerate, MisalignedBuffersTakeElementLoadsInsteadOfFailing) {
  RmsNormLinear f(DType::kBF16);
  const std::string src = generate(f.bg, "k");
  EXPECT_NE(src.find("const bool aligned_t" + std::to_string(f.w) +
                     " = reinterpret_cast<uintptr_t>(io.in2) % 16 == 0;"),
            std::string::npos);
  EXPECT_EQ(src.find("is not 16-byte aligned"), std::string::npos);
}

TEST(CudaGenerate, IndicesIntoTensorsOfOver2To31ElementsAre64Bit) {
  // X [2^17, 2^15] bf16: 2^32 elements. Rows over the grid, columns over the loop.
  BlockGraph big({8192, 1, 1}, 64);
  const int x = big.new_input({int64_t(1) << 17, int64_t(1) << 15}, DType::kBF16, {0, -1, -1}, 1);
  big.new_output(big.accum(OpKind::kAccumSumLast, x), {0, -1, -1}, DType::kF32);
  const std::string src = generate(big, "k");
  EXPECT_NE(src.find("src + int64_t((row / 1 % 16)) * 32768"), std::string::npos) << src;
  // A small tensor keeps 32-bit arithmetic.
  BlockGraph small({8, 1, 1}, 4);
  const int y = small.new_input({128, 256}, DType::kBF16, {0, -1, -1}, 1);
  small.new_output(small.accum(OpKind::kAccumSumLast, y), {0, -1, -1}, DType::kF32);
  EXPECT_EQ(generate(small, "k").find("src + int64_t("), std::string::npos);
}

TEST(CudaGenerate, RejectsASymbolThatIsNotAnIdentifier) {
  RmsNormLinear f(DType::kF32);
  EXPECT_THROW(generate(f.bg, "9bad-name"), IrError);
}

}  // namespace
}  // namespace mj::codegen::cuda

#include "cc/codegen/cuda/prelude.h"

namespace mj::codegen::cuda {

const std::string& cuda_prelude() {
  static const std::string text = R"CUDA(
#ifndef MJ_CUDA_PRELUDE
#define MJ_CUDA_PRELUDE
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "xla/ffi/api/ffi.h"

// Tensor-core matmuls on sm_80 and later. MJ_CUDA_EMULATE_MMA (tests/cuda_host_emulation.h)
// takes the same path on the host, with the warp's mma emulated, so tests without a GPU
// check the fragment layouts too.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(MJ_CUDA_EMULATE_MMA)
#define MJ_CUDA_MMA 1
#else
#define MJ_CUDA_MMA 0
#endif

namespace mj_cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

// Storage rounding: round to nearest even, once, when a tile is stored.
template <class T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}

// The interpreter's formulas (cc/ir/elementwise.h), with IEEE division and square root
// (nvcc's defaults without --use_fast_math).
// NaN propagates through max and relu, as in XLA (docs/ir-semantics.md, "NaN"); fmaxf would
// drop it. relu(-0) = +0.
__device__ __forceinline__ float max_of(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float square(float x) { return x * x; }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }
__device__ __forceinline__ float relu(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }
// 0.5 x (1 + tanh(u)) with tanh(u) = 1 - 2 / (exp(2u) + 1) is x / (1 + exp(-2u)).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * (x * (x * x)));
  return x / (1.0f + expf(-(u + u)));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = max_of(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Two floats rounded to a 16-bit type, the first in the low half (mma.sync fragment order).
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// D = A(16x16, row) B(16x8, col) + D, f32 accumulators (PTX ISA, mma.m16n8k16 fragments).
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float& d0, float& d1, float& d2, float& d3,
                                             uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(
    float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a1, uint32_t a2,
    uint32_t a3, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::mma_m16n8k16<__nv_bfloat16>(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1);
#else
  __trap();  // generated code calls it only when MJ_CUDA_MMA
#endif
}
template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(
    float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a1, uint32_t a2,
    uint32_t a3, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::mma_m16n8k16<__half>(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1);
#else
  __trap();
#endif
}

// Asynchronous global -> shared copies of BYTES (4, 8 or 16) bytes on sm_80+ (a plain copy
// before), grouped by commit and awaited with wait<N> (N = groups allowed to stay pending).
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(src), "n"(BYTES));
#else
  struct Chunk { unsigned char b[BYTES]; };
  *static_cast<Chunk*>(dst) = *static_cast<const Chunk*>(src);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

}  // namespace mj_cuda
#endif  // MJ_CUDA_PRELUDE
)CUDA";
  return text;
}

}  // namespace mj::codegen::cuda

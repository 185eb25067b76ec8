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
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "xla/ffi/api/ffi.h"

// The kernels use cp.async, ldmatrix and mma.sync with bf16/TF32: sm_80 and later.
// MJ_CUDA_EMULATE_MMA (tests/cuda_host_emulation.h) runs the same code on the host, each
// warp-wide instruction emulated from the PTX ISA's fragment layouts.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "mirage_jax CUDA kernels need sm_80 or later (cp.async, ldmatrix, bf16 mma.sync)"
#endif
#if defined(__CUDA_ARCH__)
#define MJ_CUDA_DEVICE 1
#else
#define MJ_CUDA_DEVICE 0
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
// drop it. relu(-0) = +0. max propagates NaN from either side, so the order a warp's shuffle
// tree combines in does not matter.
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
#if MJ_CUDA_DEVICE
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::mma_m16n8k16<__nv_bfloat16>(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1);
#else
  __trap();  // host code never runs device helpers
#endif
}
template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(
    float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a1, uint32_t a2,
    uint32_t a3, uint32_t b0, uint32_t b1) {
#if MJ_CUDA_DEVICE
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::mma_m16n8k16<__half>(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1);
#else
  __trap();  // host code never runs device helpers
#endif
}

// f32 -> TF32 (10 mantissa bits), round to nearest with ties away from zero, as cvt.rna;
// the bits of a float whose low 13 bits are zero.
__device__ __forceinline__ uint32_t to_tf32(float x) {
#if MJ_CUDA_DEVICE
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#elif defined(MJ_CUDA_EMULATE_MMA)
  return mj_emulation::to_tf32(x);
#else
  __trap();  // host code never runs device helpers
  return 0u;
#endif
}
__device__ __forceinline__ uint32_t tf32_bits(uint32_t f32_bits) {
  return to_tf32(__uint_as_float(f32_bits));
}

// D = A(16x8, row) B(8x8, col) + D on TF32 operands, f32 accumulators (mma.m16n8k8 .tf32).
__device__ __forceinline__ void mma_m16n8k8_tf32(float& d0, float& d1, float& d2, float& d3,
                                                 uint32_t a0, uint32_t a1, uint32_t a2,
                                                 uint32_t a3, uint32_t b0, uint32_t b1) {
#if MJ_CUDA_DEVICE
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::mma_m16n8k8_tf32(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1);
#else
  __trap();  // host code never runs device helpers
#endif
}

// ldmatrix: 8x8 matrices of 16-bit elements from shared memory, one row of 16 bytes per
// lane address (lanes 0-7 the first matrix's rows, 8-15 the second's, ...); register i of
// lane l receives row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1 of matrix i (.trans: of
// its transpose).
__device__ __forceinline__ void ldsm_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                        const void* row) {
#if MJ_CUDA_DEVICE
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(s));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::ldmatrix<4, false>(row, &r0, &r1, &r2, &r3);
#else
  __trap();  // host code never runs device helpers
#endif
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                              uint32_t& r3, const void* row) {
#if MJ_CUDA_DEVICE
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(s));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::ldmatrix<4, true>(row, &r0, &r1, &r2, &r3);
#else
  __trap();  // host code never runs device helpers
#endif
}
__device__ __forceinline__ void ldsm_x2_trans(uint32_t& r0, uint32_t& r1, const void* row) {
#if MJ_CUDA_DEVICE
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(s));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::ldmatrix<2, true>(row, &r0, &r1, nullptr, nullptr);
#else
  __trap();  // host code never runs device helpers
#endif
}

// Asynchronous global -> shared copies of BYTES (4, 8 or 16) bytes, both addresses aligned
// to BYTES, grouped by commit and awaited with wait<N> (N = groups allowed to stay pending).
template <int BYTES>
__device__ __forceinline__ void cp_async(void* dst, const void* src) {
#if MJ_CUDA_DEVICE
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(src), "n"(BYTES));
#elif defined(MJ_CUDA_EMULATE_MMA)
  mj_emulation::cp_async<BYTES>(dst, src);
#else
  __trap();  // host code never runs device helpers
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if MJ_CUDA_DEVICE
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if MJ_CUDA_DEVICE
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// ---- host side: what the FFI handler checks before a kernel's first launch on a device
#if !defined(MJ_CUDA_EMULATE_MMA)
constexpr int kMaxDevices = 64;

inline std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// Empty when `kernel` can run on `device` with `smem` bytes of dynamic shared memory and
// `threads` threads a block (the shared memory is granted to it there); else the reason.
inline std::string prepare_kernel(const void* kernel, int device, int smem, int threads) {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    (void)cudaGetLastError();
    return "no CUDA driver found";
  }
  // The runtime is linked statically: CUDA's minor-version compatibility needs a driver of
  // at least this toolkit's major version.
  if (driver / 1000 < CUDART_VERSION / 1000) {
    return "the CUDA driver supports CUDA " + cuda_version_text(driver) +
           ", older than the toolkit this kernel was built with (CUDA " +
           cuda_version_text(CUDART_VERSION) + "); update the driver, or build with an older "
           "toolkit";
  }
  int previous = -1;
  (void)cudaGetDevice(&previous);
  if (previous != device && cudaSetDevice(device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "cannot use device " + std::to_string(device);
  }
  std::string problem;
  cudaDeviceProp prop{};
  (void)cudaGetDeviceProperties(&prop, device);
  const std::string name = "device " + std::to_string(device) + " (" + prop.name + ", sm_" +
                           std::to_string(prop.major) + std::to_string(prop.minor) + ")";
  cudaFuncAttributes attr{};
  int optin = 0;
  cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
  if (err != cudaSuccess) {
    problem = name + " cannot load the kernel: " + cudaGetErrorString(err) +
              " (the library has no SASS for this architecture and its PTX could not be "
              "compiled for it)";
  } else if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
             cudaSuccess) {
    problem = name + ": cannot query its shared memory per block";
  } else if (int64_t(smem) + int64_t(attr.sharedSizeBytes) > optin) {
    problem = "the kernel needs " + std::to_string(smem + int(attr.sharedSizeBytes)) +
              " bytes of shared memory per block; " + name + " allows " +
              std::to_string(optin) + " (plan it for this device: the kernel was planned for "
              "another architecture's limit)";
  } else if (attr.maxThreadsPerBlock < threads) {
    problem = "the kernel needs " + std::to_string(threads) + " threads per block; " + name +
              " can run at most " + std::to_string(attr.maxThreadsPerBlock) +
              " of it (registers)";
  } else if (smem > 48 * 1024 &&
             (err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         smem)) != cudaSuccess) {
    problem = "cannot give the kernel " + std::to_string(smem) + " bytes of shared memory on " +
              name + ": " + cudaGetErrorString(err);
  }
  (void)cudaGetLastError();  // the errors above are reported here, not left for others
  if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
  return problem;
}
#endif  // !MJ_CUDA_EMULATE_MMA

}  // namespace mj_cuda
#endif  // MJ_CUDA_PRELUDE
)CUDA";
  return text;
}

}  // namespace mj::codegen::cuda

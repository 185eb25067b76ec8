#pragma once
// The single op enum shared by the kernel level and the block level. Which kinds are legal
// at which level is decided by the graph builders, not by separate enums.
#include <cstdint>
#include <string_view>

namespace mj::ir {

enum class OpKind : uint8_t {
  // graph boundary
  kInput,   // kernel: program input. block: a tile of a kernel tensor (imap, fmap)
  kOutput,  // kernel: marks a program output. block: stores the epilogue tile (omap)
  // unary elementwise (kMulScalar / kAddScalar carry `scalar`)
  kExp, kSquare, kSqrt, kRsqrt, kSilu, kGelu, kRelu, kSigmoid, kNeg, kRecip,
  kMulScalar, kAddScalar,
  // binary elementwise, numpy broadcasting of size-1 dims (right-aligned ranks)
  kAdd, kSub, kMul, kDiv,
  kMatmul,   // batched [..., m, k] @ [..., k, n]
  kReduce,   // `dim`, `reduce`; keeps the dim as size 1
  kRmsNorm,  // x / sqrt(mean(x^2, last dim) + scalar)
  kConcat,   // `dim`
  kCustomized,  // kernel level only: a graph-defined op, `block_graph`
  // block level only: for-loop accumulators. Input in the body, output in the epilogue.
  kAccumSum,       // sum over iterations, same shape
  kAccumSumLast,   // sum over iterations and over the last dim -> last dim 1
  kAccumMeanLast,  // that sum / (forloop_range * tile last dim)
  kAccumRmsLast,   // sqrt(mean over iterations and last dim of x^2 + scalar) -> last dim 1
  // online softmax. M(s) is the max of s over the last dim across all iterations. The three
  // accumulators taking the same s share one running max in generated code.
  kAccumMaxLast,     // M(s), last dim 1
  kAccumExpSumLast,  // sum over iterations and last dim of exp(s - M(s)), last dim 1
  kAccumExpMatmul,   // sum over iterations of exp(s - M(s)) @ v; inputs (s, v)
};

enum class ReduceKind : uint8_t { kSum, kMean, kMax };

std::string_view op_kind_name(OpKind k);   // the Python builder's name, e.g. "rms_norm"
// Inverse of op_kind_name ("input" and "output" for the boundary kinds); throws IrError.
OpKind parse_op_kind(std::string_view name);
std::string_view reduce_kind_name(ReduceKind k);
ReduceKind parse_reduce_kind(std::string_view s);  // throws IrError

bool is_unary_elementwise(OpKind k);
bool is_binary_elementwise(OpKind k);
bool is_elementwise(OpKind k);
bool is_accumulator(OpKind k);

}  // namespace mj::ir

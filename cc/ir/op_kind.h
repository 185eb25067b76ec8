#pragma once
// The single op enum shared by the kernel level and the block level, and what the op table
// (ops.def) says about each kind. Which kinds are legal at which level is enforced by the
// graph builders; the table records it for readers (JSON, Python).
#include <cstdint>
#include <string_view>

namespace mj::ir {

enum class OpKind : uint8_t {
#define MJ_OP(Name, name, arity, levels, cls, attr, flops, formula) k##Name,
#include "cc/ir/ops.def"
#undef MJ_OP
};

inline constexpr int kNumOpKinds = 0
#define MJ_OP(Name, name, arity, levels, cls, attr, flops, formula) +1
#include "cc/ir/ops.def"
#undef MJ_OP
    ;

enum class OpLevels : uint8_t { kKernel, kBlock, kBoth };

// Which builder makes an op, and so which shape rule it follows.
enum class OpClass : uint8_t {
  kBoundary,     // new_input / mark_output, new_output
  kUnary,        // Graph::unary: same shape
  kBinary,       // Graph::binary: broadcast shape
  kMatmul,       // Graph::matmul
  kReduce,       // Graph::reduce: `dim` becomes 1
  kRmsNorm,      // Graph::rms_norm: same shape
  kConcat,       // Graph::concat
  kCustomized,   // KernelGraph::customized: the block graph's outputs
  kAccum,        // BlockGraph::accum: same shape
  kAccumLast,    // BlockGraph::accum: the last dim becomes 1
  kAccumMatmul,  // BlockGraph::accum_exp_matmul: the matmul shape
};

// The attribute an op carries besides its inputs (the Op fields it sets).
enum class OpAttr : uint8_t {
  kNone,
  kScalar,      // `scalar`: the constant of mul_scalar / add_scalar
  kEps,         // `scalar`, named eps
  kDim,         // `dim`
  kDimReduce,   // `dim` and `reduce`
  kBlockGraph,  // `block_graph`
};

struct OpInfo {
  std::string_view name;  // the Python builder's name, e.g. "rms_norm"
  int arity;              // inputs; -1 for any number
  OpLevels levels;
  OpClass cls;
  OpAttr attr;
  int flops;  // per element, see ops.def
};

// The table row of k; k must be a valid kind.
const OpInfo& op_info(OpKind k);

enum class ReduceKind : uint8_t { kSum, kMean, kMax };

std::string_view op_kind_name(OpKind k);  // "invalid_op_kind" for a value outside the table
// Inverse of op_kind_name ("input" and "output" for the boundary kinds); throws IrError.
OpKind parse_op_kind(std::string_view name);
std::string_view reduce_kind_name(ReduceKind k);
ReduceKind parse_reduce_kind(std::string_view s);  // throws IrError
std::string_view op_class_name(OpClass c);         // "unary", "accum_last", ...
std::string_view op_attr_name(OpAttr a);           // "scalar", "dim_reduce", ...

bool is_unary_elementwise(OpKind k);
bool is_binary_elementwise(OpKind k);
bool is_elementwise(OpKind k);
bool is_accumulator(OpKind k);
bool legal_at_kernel_level(OpKind k);
bool legal_at_block_level(OpKind k);
// Carries `scalar` (a constant or an eps).
bool has_scalar(OpKind k);

}  // namespace mj::ir

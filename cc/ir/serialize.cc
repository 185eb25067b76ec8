#include "cc/ir/serialize.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cc/ir/append_op.h"
#include "cc/ir/error.h"

namespace mj::ir {
namespace {

// Insertion-ordered objects: keys are written in the documented order, and messages show a
// document's keys in the order it has them.
using Json = nlohmann::ordered_json;

enum class Level { kKernel, kBlock };

const char* level_graph_name(Level level) {
  return level == Level::kKernel ? "KernelGraph" : "BlockGraph";
}

bool legal_at(OpKind k, Level level) {
  return level == Level::kKernel ? legal_at_kernel_level(k) : legal_at_block_level(k);
}

// The attribute keys of `kind` at `level`, in the order they are written.
std::vector<std::string> attribute_keys(OpKind kind, Level level) {
  const bool block = level == Level::kBlock;
  if (kind == OpKind::kInput) {
    if (block) return {"shape", "dtype", "imap", "fmap"};
    return {"shape", "dtype"};
  }
  if (kind == OpKind::kOutput) {
    if (block) return {"omap", "dtype"};
    return {};
  }
  switch (op_info(kind).attr) {
    case OpAttr::kNone: return {};
    case OpAttr::kScalar:
    case OpAttr::kEps: return {"scalar"};
    case OpAttr::kDim: return {"dim"};
    case OpAttr::kDimReduce: return {"dim", "reduce_kind"};
    case OpAttr::kBlockGraph: return {"block_graph"};
  }
  return {};
}

// ---- writing ----------------------------------------------------------------------------

template <class Ints>
Json int_list(const Ints& values) {
  Json list = Json::array();
  for (auto v : values) list.push_back(v);
  return list;
}

Json ops_to_json(const Graph& g, Level level);

Json block_graph_to_json(const BlockGraph& bg) {
  Json obj = Json::object();
  obj["grid"] = int_list(bg.grid());
  obj["forloop_range"] = bg.forloop_range();
  obj["ops"] = ops_to_json(bg, Level::kBlock);
  return obj;
}

Json attribute_to_json(const Graph& g, const Op& op, const std::string& key, Level level) {
  const auto* bg = level == Level::kBlock ? static_cast<const BlockGraph*>(&g) : nullptr;
  if (key == "shape") {
    return int_list(bg ? bg->kernel_input_shape(op.io_index) : g.tensor(op.outputs[0]).shape);
  }
  if (key == "dtype") {
    if (!bg) return dtype_name(g.tensor(op.outputs[0]).dtype);
    return dtype_name(op.kind == OpKind::kInput ? bg->kernel_input_dtype(op.io_index)
                                                : bg->kernel_output_dtype(op.io_index));
  }
  if (key == "imap") return int_list(op.imap);
  if (key == "fmap") return op.fmap;
  if (key == "omap") return int_list(op.omap);
  if (key == "scalar") return op.scalar;
  if (key == "dim") return op.dim;
  if (key == "reduce_kind") return reduce_kind_name(op.reduce);
  if (key == "block_graph") return block_graph_to_json(*op.block_graph);
  throw IrError("to_json: no rule for attribute '" + key + "'");
}

Json ops_to_json(const Graph& g, Level level) {
  Json ops = Json::array();
  for (const Op& op : g.ops()) {
    Json obj = Json::object();
    obj["kind"] = op_kind_name(op.kind);
    if (op.kind != OpKind::kInput) obj["inputs"] = int_list(op.inputs);
    if (op.kind != OpKind::kOutput) obj["outputs"] = int_list(op.outputs);
    for (const std::string& key : attribute_keys(op.kind, level)) {
      obj[key] = attribute_to_json(g, op, key, level);
    }
    ops.push_back(std::move(obj));
  }
  return ops;
}

// ---- how Python shows a value (the messages are those of the Python builders) -------------

std::string py_type(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "bytes";
  }
}

std::string py_str_repr(const std::string& s) {
  const bool double_quotes = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = double_quotes ? '"' : '\'';
  std::string out(1, quote);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == quote || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + quote;
}

std::string py_repr(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case Json::value_t::string: return py_str_repr(v.get<std::string>());
    case Json::value_t::array: {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + py_repr(v[i]);
      return s + "]";
    }
    case Json::value_t::object: {
      std::string s = "{";
      bool first = true;
      for (const auto& [key, value] : v.items()) {
        s += (first ? "" : ", ") + py_str_repr(key) + ": " + py_repr(value);
        first = false;
      }
      return s + "}";
    }
    default: return v.dump();  // numbers: the shortest form that reads back the same
  }
}

// A list's entries as Python shows a tuple of them: (2, 1), (2,), ().
std::string py_tuple_repr(const Json& list) {
  std::string s = "(";
  for (size_t i = 0; i < list.size(); ++i) s += (i ? ", " : "") + py_repr(list[i]);
  return s + (list.size() == 1 ? ",)" : ")");
}

// ---- argument checks: the rules of the Python builders, for values read from JSON ---------

std::string argument(const std::string& op, const std::string& arg) {
  return op + ": argument '" + arg + "'";
}

int64_t integer(const Json& v, const std::string& op, const std::string& arg, int bits = 32) {
  if (v.is_boolean()) {
    throw IrError(argument(op, arg) + " must be an integer, got bool " + py_repr(v));
  }
  if (!v.is_number_integer()) {
    throw IrError(argument(op, arg) + " must be an integer, got " + py_type(v) + " " + py_repr(v));
  }
  const int64_t limit =
      bits == 64 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int32_t>::max();
  const bool fits = v.is_number_unsigned()
                        ? v.get<uint64_t>() <= uint64_t(limit)
                        : v.get<int64_t>() >= -limit - 1 && v.get<int64_t>() <= limit;
  if (!fits) {
    throw IrError(argument(op, arg) + " = " + v.dump() + " does not fit a " + std::to_string(bits) +
                  "-bit integer");
  }
  return v.get<int64_t>();
}

const Json& sequence(const Json& v, const std::string& op, const std::string& arg) {
  if (!v.is_array()) {
    throw IrError(argument(op, arg) + " must be a tuple or list of integers, got " + py_type(v) +
                  " " + py_repr(v));
  }
  return v;
}

Shape shape(const Json& v, const std::string& op, const std::string& arg) {
  Shape s;
  const Json& dims = sequence(v, op, arg);
  for (size_t i = 0; i < dims.size(); ++i) {
    s.push_back(integer(dims[i], op, arg + "[" + std::to_string(i) + "]", 64));
  }
  return s;
}

Dim3 triple(const Json& v, const std::string& op, const std::string& arg) {
  const Json& items = sequence(v, op, arg);
  if (items.size() != 3) {
    throw IrError(argument(op, arg) + " must have 3 entries, one per grid axis (x, y, z), got " +
                  std::to_string(items.size()) + ": " + py_tuple_repr(items));
  }
  Dim3 out;
  for (size_t i = 0; i < 3; ++i) {
    out[i] = int(integer(items[i], op, arg + "[" + std::to_string(i) + "]"));
  }
  return out;
}

DType dtype(const Json& v, const std::string& op) {
  const std::string names = "float32, bfloat16, float16";
  if (!v.is_string()) {
    throw IrError(argument(op, "dtype") + " must be a dtype name, one of " + names + "; got " +
                  py_type(v) + " " + py_repr(v));
  }
  const std::string name = v.get<std::string>();
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (name == dtype_name(d)) return d;
  }
  throw IrError(argument(op, "dtype") + ": unknown dtype " + py_repr(v) + " (expected one of " +
                names + ")");
}

double scalar(const Json& v, const std::string& op, const std::string& arg) {
  if (v.is_boolean() || !v.is_number()) {
    throw IrError(argument(op, arg) + " must be a real number, got " + py_type(v) + " " +
                  py_repr(v));
  }
  return v.get<double>();
}

ReduceKind reduce_kind(const Json& v) {
  if (!v.is_string())
    throw IrError(argument("reduce", "kind") + " must be a string, got " + py_type(v));
  const std::string s = v.get<std::string>();
  for (ReduceKind k : {ReduceKind::kSum, ReduceKind::kMean, ReduceKind::kMax}) {
    if (s == reduce_kind_name(k)) return k;
  }
  throw IrError(argument("reduce", "kind") + ": unknown value " + py_repr(v) +
                " (expected one of sum, mean, max)");
}

// ---- reading ----------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& where, const std::string& problem) {
  throw IrError("from_json: " + where + " " + problem);
}

// Runs one builder step; its IrError (a rule of the IR, or an argument of the wrong type)
// becomes a from_json error naming the place.
template <class F>
auto at_place(const std::string& where, F&& build) -> decltype(build()) {
  try {
    return build();
  } catch (const IrError& e) {
    throw IrError("from_json: " + where + ": " + e.what());
  }
}

std::string quoted_keys(const std::set<std::string>& keys) {
  std::string s;
  for (const std::string& k : keys) s += (s.empty() ? "" : ", ") + py_str_repr(k);
  return s;
}

void check_keys(const Json& obj, const std::vector<std::string>& expected,
                const std::string& where) {
  std::set<std::string> missing(expected.begin(), expected.end()), unexpected;
  for (const auto& item : obj.items()) {
    if (!missing.erase(item.key()) &&
        std::find(expected.begin(), expected.end(), item.key()) == expected.end()) {
      unexpected.insert(item.key());
    }
  }
  if (!missing.empty()) fail(where, "is missing " + quoted_keys(missing));
  if (!unexpected.empty()) fail(where, "has unexpected " + quoted_keys(unexpected));
}

std::vector<int64_t> id_list(const Json& obj, const std::string& key, const std::string& where) {
  const Json empty = Json::array();
  const Json& ids = obj.contains(key) ? obj.at(key) : empty;
  bool ok = ids.is_array();
  for (size_t i = 0; ok && i < ids.size(); ++i) ok = ids[i].is_number_integer();
  if (!ok) fail(where, "'" + key + "' must be a list of integer tensor ids, got " + py_repr(ids));
  std::vector<int64_t> out;
  for (const Json& i : ids) out.push_back(i.get<int64_t>());
  return out;
}

// The builder call an op object records (its keys checked); returns the new tensor ids (none
// for outputs). `block` is a customized op's block graph, read beforehand.
std::vector<int> build(Graph& g, Level level, OpKind kind, const std::vector<int>& inputs,
                       const Json& obj, std::shared_ptr<const BlockGraph> block) {
  const std::string name(op_kind_name(kind));
  if (kind == OpKind::kInput) {
    if (level == Level::kKernel) {
      const Shape s = shape(obj.at("shape"), "new_input", "shape");
      return {static_cast<KernelGraph&>(g).new_input(s, dtype(obj.at("dtype"), "new_input"))};
    }
    const Shape s = shape(obj.at("shape"), "new_input", "kernel_shape");
    const DType d = dtype(obj.at("dtype"), "new_input");
    const Dim3 imap = triple(obj.at("imap"), "new_input", "imap");
    const int fmap = int(integer(obj.at("fmap"), "new_input", "fmap"));
    return {static_cast<BlockGraph&>(g).new_input(s, d, imap, fmap)};
  }
  if (kind == OpKind::kOutput) {
    if (level == Level::kKernel) {
      static_cast<KernelGraph&>(g).mark_output(inputs[0]);
      return {};
    }
    auto& bg = static_cast<BlockGraph&>(g);
    const Dim3 omap = triple(obj.at("omap"), "new_output", "omap");
    // null keeps the stored tensor's dtype, as new_output's default does.
    const Json& d = obj.at("dtype");
    bg.new_output(inputs[0], omap,
                  d.is_null() ? g.tensor(inputs[0]).dtype : dtype(d, "new_output"));
    return {};
  }
  if (kind == OpKind::kCustomized) return static_cast<KernelGraph&>(g).customized(inputs, block);
  Op like;
  like.kind = kind;
  switch (op_info(kind).attr) {
    case OpAttr::kScalar: like.scalar = scalar(obj.at("scalar"), name, "c"); break;
    case OpAttr::kEps: like.scalar = scalar(obj.at("scalar"), name, "eps"); break;
    case OpAttr::kDimReduce:
      like.dim = int(integer(obj.at("dim"), name, "dim"));
      like.reduce = reduce_kind(obj.at("reduce_kind"));
      break;
    case OpAttr::kDim: like.dim = int(integer(obj.at("dim"), name, "dim")); break;
    case OpAttr::kNone:
    case OpAttr::kBlockGraph: break;
  }
  return {append_op(g, like, inputs)};
}

std::shared_ptr<const BlockGraph> block_graph_from_json(const Json& obj, const std::string& where);

void replay_ops(Graph& g, Level level, const Json& ops, const std::string& where) {
  if (!ops.is_array()) fail(where, "must be a list of ops");
  std::map<int64_t, int> tensors;  // recorded tensor id -> the rebuilt graph's id
  for (size_t index = 0; index < ops.size(); ++index) {
    const Json& obj = ops[index];
    std::string at = where + "[" + std::to_string(index) + "]";
    if (!obj.is_object()) fail(at, "must be a JSON object");
    const Json kind_json = obj.contains("kind") ? obj.at("kind") : Json();
    OpKind kind = OpKind::kInput;
    bool known = false;
    if (kind_json.is_string()) {
      for (int k = 0; k < kNumOpKinds && !known; ++k) {
        known =
            op_kind_name(OpKind(k)) == kind_json.get<std::string>() && legal_at(OpKind(k), level);
        if (known) kind = OpKind(k);
      }
    }
    if (!known) {
      fail(at, "has unknown kind " + py_repr(kind_json) + " for a " + level_graph_name(level));
    }
    at += " (" + std::string(op_kind_name(kind)) + ")";
    std::vector<std::string> keys = {"kind"};
    if (kind != OpKind::kInput) keys.push_back("inputs");
    if (kind != OpKind::kOutput) keys.push_back("outputs");
    for (std::string& key : attribute_keys(kind, level)) keys.push_back(std::move(key));
    check_keys(obj, keys, at);
    std::vector<int> inputs;
    for (int64_t id : id_list(obj, "inputs", at)) {
      const auto found = tensors.find(id);
      if (found == tensors.end()) {
        fail(at, "uses tensor id " + std::to_string(id) +
                     ", which no earlier op of this graph defines");
      }
      inputs.push_back(found->second);
    }
    const int arity = op_info(kind).arity;
    if (arity >= 0 && int(inputs.size()) != arity) {
      fail(at,
           "has " + std::to_string(inputs.size()) + " inputs, expected " + std::to_string(arity));
    }
    std::shared_ptr<const BlockGraph> block;
    if (kind == OpKind::kCustomized)
      block = block_graph_from_json(obj.at("block_graph"), at + ".block_graph");
    const std::vector<int> results =
        at_place(at, [&] { return build(g, level, kind, inputs, obj, block); });
    const std::vector<int64_t> recorded = id_list(obj, "outputs", at);
    if (recorded.size() != results.size()) {
      fail(at, "records " + std::to_string(recorded.size()) + " outputs but the op has " +
                   std::to_string(results.size()));
    }
    for (size_t i = 0; i < recorded.size(); ++i) {
      if (!tensors.emplace(recorded[i], results[i]).second) {
        fail(at, "redefines tensor id " + std::to_string(recorded[i]));
      }
    }
  }
}

std::shared_ptr<const BlockGraph> block_graph_from_json(const Json& obj, const std::string& where) {
  if (!obj.is_object()) fail(where, "must be a JSON object");
  check_keys(obj, {"grid", "forloop_range", "ops"}, where);
  auto bg = at_place(where, [&] {
    const Dim3 grid = triple(obj.at("grid"), "BlockGraph", "grid");
    const int forloop_range = int(integer(obj.at("forloop_range"), "BlockGraph", "forloop_range"));
    return std::make_shared<BlockGraph>(grid, forloop_range);
  });
  replay_ops(*bg, Level::kBlock, obj.at("ops"), where + ".ops");
  return bg;
}

bool is_version(const Json& v) {
  // Python's reader compared with ==, so 1.0 was version 1 too.
  return v.is_number() && !v.is_boolean() && v.get<double>() == kGraphJsonVersion;
}

}  // namespace

std::string kernel_graph_to_json(const KernelGraph& g) {
  Json doc = Json::object();
  doc["format"] = kGraphJsonFormat;
  doc["version"] = kGraphJsonVersion;
  doc["ops"] = ops_to_json(g, Level::kKernel);
  return doc.dump();
}

KernelGraph kernel_graph_from_json(std::string_view text) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // What the parser says, without its "[json.exception.parse_error.101] " tag.
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) {
      what = what.substr(tag_end + 2);
    }
    throw IrError("from_json: not valid JSON: " + what);
  }
  const std::string where = "the document";
  if (!doc.is_object()) fail(where, "must be a JSON object");
  const Json format = doc.contains("format") ? doc.at("format") : Json();
  if (!(format.is_string() && format.get<std::string>() == kGraphJsonFormat)) {
    fail(where, "has format " + py_repr(format) + ", expected " +
                    py_str_repr(std::string(kGraphJsonFormat)));
  }
  const Json version = doc.contains("version") ? doc.at("version") : Json();
  if (!is_version(version)) {
    fail(where, "has version " + py_repr(version) + "; this reader supports version " +
                    std::to_string(kGraphJsonVersion));
  }
  check_keys(doc, {"format", "version", "ops"}, where);
  KernelGraph g;
  replay_ops(g, Level::kKernel, doc.at("ops"), "ops");
  return g;
}

}  // namespace mj::ir

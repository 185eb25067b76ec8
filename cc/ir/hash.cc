// Merkle-style content hashes. Each tensor's hash covers its op (kind and every attribute),
// its operands' hashes in order, its output index, shape, dtype and phase; inputs carry their
// input position instead of an operand. The graph hash then combines the *sorted* multiset of
// tensor hashes with the *ordered* output hashes, so only the order in which independent ops
// were appended is forgotten.
#include "cc/ir/hash.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace mj::ir {
namespace {

struct Hash128 {
  uint64_t hi = 0, lo = 0;
  bool operator<(const Hash128& o) const { return std::tie(hi, lo) < std::tie(o.hi, o.lo); }
};

// The murmur3 64-bit finalizer: a bijection with full avalanche.
uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

// Two independently keyed 64-bit chains; a word changes both, a collision needs both to
// collide.
class Hasher {
 public:
  explicit Hasher(uint64_t domain_tag) { add(domain_tag); }
  Hasher& add(uint64_t w) {
    a_ = fmix64(a_ ^ w) + 0x9e3779b97f4a7c15ULL;
    b_ = fmix64(b_ + (w ^ 0xd6e8feb86659fd93ULL)) ^ 0xa0761d6478bd642fULL;
    ++n_;
    return *this;
  }
  Hasher& add_int(int64_t v) { return add(uint64_t(v)); }
  Hasher& add_double(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return add(bits);
  }
  Hasher& add(const Hash128& h) { return add(h.hi).add(h.lo); }
  Hasher& add_shape(const Shape& s) {
    add_int(int64_t(s.size()));
    for (int64_t d : s) add_int(d);
    return *this;
  }
  Hasher& add_dim3(const Dim3& d) { return add_int(d[0]).add_int(d[1]).add_int(d[2]); }
  Hash128 finish() const {
    // Length-finalize so that prefixes differ, and cross the chains once.
    const uint64_t a = fmix64(a_ ^ n_), b = fmix64(b_ + n_ * 0x94d049bb133111ebULL);
    return {fmix64(a ^ (b >> 1)), fmix64(b ^ (a << 1))};
  }

 private:
  uint64_t a_ = 0x243f6a8885a308d3ULL, b_ = 0x13198a2e03707344ULL, n_ = 0;
};

enum Tag : uint64_t { kTagOp = 1, kTagTensor, kTagKernelGraph, kTagBlockGraph, kTagOutput };

Hash128 block_hash128(const BlockGraph& g);

// Hashes of every tensor of g, indexed by tensor id.
std::vector<Hash128> tensor_hashes(const Graph& g) {
  std::vector<Hash128> th(g.tensors().size());
  for (const Op& op : g.ops()) {
    Hasher h(kTagOp);
    h.add(uint64_t(op.kind)).add_double(op.scalar).add_int(op.dim).add(uint64_t(op.reduce));
    h.add_dim3(op.imap).add_int(op.fmap).add_dim3(op.omap);
    if (op.kind == OpKind::kInput) h.add_int(op.io_index);
    h.add_int(int64_t(op.inputs.size()));
    for (int in : op.inputs) h.add(th[in]);
    if (op.block_graph) h.add(block_hash128(*op.block_graph));
    const Hash128 op_hash = h.finish();
    for (size_t i = 0; i < op.outputs.size(); ++i) {
      const Tensor& t = g.tensors()[op.outputs[i]];
      th[op.outputs[i]] = Hasher(kTagTensor)
                              .add(op_hash)
                              .add_int(int64_t(i))
                              .add_shape(t.shape)
                              .add(uint64_t(t.dtype))
                              .add(uint64_t(t.phase))
                              .finish();
    }
  }
  return th;
}

void add_sorted(Hasher& h, std::vector<Hash128> hashes) {
  std::sort(hashes.begin(), hashes.end());
  h.add_int(int64_t(hashes.size()));
  for (const Hash128& x : hashes) h.add(x);
}

Hash128 block_hash128(const BlockGraph& g) {
  const std::vector<Hash128> th = tensor_hashes(g);
  Hasher h(kTagBlockGraph);
  h.add_dim3(g.grid()).add_int(g.forloop_range());
  add_sorted(h, th);
  h.add_int(g.num_inputs());
  for (int i = 0; i < g.num_inputs(); ++i) {
    h.add_shape(g.kernel_input_shape(i)).add(uint64_t(g.kernel_input_dtype(i)));
  }
  h.add_int(g.num_outputs());
  for (const Op& op : g.ops()) {  // kOutput ops are in output order
    if (op.kind != OpKind::kOutput) continue;
    h.add(Hasher(kTagOutput)
              .add(th[op.inputs[0]])
              .add_dim3(op.omap)
              .add(uint64_t(g.kernel_output_dtype(op.io_index)))
              .add_shape(g.kernel_output_shape(op.io_index))
              .finish());
  }
  return h.finish();
}

std::string hex(const Hash128& x) {
  static const char* const kDigits = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[15 - i] = kDigits[(x.hi >> (4 * i)) & 15];
    s[31 - i] = kDigits[(x.lo >> (4 * i)) & 15];
  }
  return s;
}

}  // namespace

std::string graph_hash(const KernelGraph& g) {
  const std::vector<Hash128> th = tensor_hashes(g);
  Hasher h(kTagKernelGraph);
  add_sorted(h, th);
  h.add_int(int64_t(g.output_ids().size()));
  for (int t : g.output_ids()) h.add(th[t]);
  return hex(h.finish());
}

std::string block_graph_hash(const BlockGraph& g) { return hex(block_hash128(g)); }

}  // namespace mj::ir

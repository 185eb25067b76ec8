#include "cc/cost/cpu_vector_cost.h"

namespace mj::cost {

using ir::OpKind;

double cpu_extra_element_flops(OpKind kind, bool generated) {
  switch (kind) {
    case OpKind::kExp: return kExpFlops - 1;
    case OpKind::kSigmoid:
    case OpKind::kSilu: return 47;
    case OpKind::kGelu: return 60;
    case OpKind::kErf:
    case OpKind::kErfc: return generated ? 110 : kExpFlops;
    case OpKind::kDiv:
    case OpKind::kRecip: return 12;
    case OpKind::kSqrt: return 16;
    case OpKind::kRsqrt: return 26;
    default: return 0;
  }
}

}  // namespace mj::cost

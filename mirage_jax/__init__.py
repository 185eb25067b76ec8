"""mirage_jax: a multi-level superoptimizer for JAX programs (Mirage μGraphs)."""

from mirage_jax._core import IRError
from mirage_jax._handles import Op, Tensor
from mirage_jax._verify import VerifyResult, verify_equivalent
from mirage_jax.graph import BlockGraph, KernelGraph

__all__ = [
    "BlockGraph",
    "IRError",
    "KernelGraph",
    "Op",
    "Tensor",
    "VerifyResult",
    "verify_equivalent",
]

"""mirage_jax: a multi-level superoptimizer for JAX programs (Mirage μGraphs)."""

from mirage_jax._core import IRError
from mirage_jax.ir.graph import BlockGraph, KernelGraph
from mirage_jax.ir.handles import Op, Tensor
from mirage_jax.rewrite.decorator import optimize
from mirage_jax.runtime.compile import compile, generate_code
from mirage_jax.superopt.config import SearchConfig
from mirage_jax.superopt.progress import SearchProgress
from mirage_jax.superopt.search import SearchResult, SearchStats, search
from mirage_jax.superopt.superoptimize import Superoptimized, superoptimize
from mirage_jax.superopt.verify import VerifyResult, verify_equivalent

__all__ = [
    "BlockGraph",
    "IRError",
    "KernelGraph",
    "Op",
    "SearchConfig",
    "SearchProgress",
    "SearchResult",
    "SearchStats",
    "Superoptimized",
    "Tensor",
    "VerifyResult",
    "compile",
    "generate_code",
    "optimize",
    "search",
    "superoptimize",
    "verify_equivalent",
]

"""mirage_jax: a multi-level superoptimizer for JAX programs (Mirage μGraphs)."""

from mirage_jax._compile import compile, generate_code
from mirage_jax._core import IRError
from mirage_jax._handles import Op, Tensor
from mirage_jax._progress import SearchProgress
from mirage_jax._search import SearchConfig, SearchResult, SearchStats, search
from mirage_jax._superoptimize import Superoptimized, superoptimize
from mirage_jax._verify import VerifyResult, verify_equivalent
from mirage_jax.graph import BlockGraph, KernelGraph

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
    "search",
    "superoptimize",
    "verify_equivalent",
]

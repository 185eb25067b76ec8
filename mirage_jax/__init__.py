"""mirage_jax: a multi-level superoptimizer for JAX programs (Mirage μGraphs)."""

from mirage_jax._core import IRError
from mirage_jax.ir.graph import BlockGraph, KernelGraph
from mirage_jax.ir.handles import Op, Tensor
from mirage_jax.runtime.compile import compile, generate_code
from mirage_jax.superopt.config import SearchConfig
from mirage_jax.superopt.progress import SearchProgress
from mirage_jax.superopt.search import SearchResult, SearchStats, search
from mirage_jax.superopt.superoptimize import Superoptimized, superoptimize
from mirage_jax.superopt.verify import VerifyResult, verify_equivalent


def optimize(fun=None, **options):
    """`@mirage_jax.optimize`: run a function's fusible regions as superoptimized kernels.
    Options: config, backend, cache_dir, min_region_flops, static_argnums, static_argnames;
    see mirage_jax/rewrite/decorator.py (imported on first use, so `import mirage_jax` stays
    light)."""
    from mirage_jax.rewrite.decorator import optimize as _optimize

    return _optimize(fun, **options)


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

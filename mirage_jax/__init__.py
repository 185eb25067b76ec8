"""mirage_jax: a multi-level superoptimizer for JAX programs (Mirage μGraphs)."""

from mirage_jax._compile import compile, generate_code
from mirage_jax._core import IRError
from mirage_jax._handles import Op, Tensor
from mirage_jax._progress import SearchProgress
from mirage_jax._search import SearchConfig, SearchResult, SearchStats, search
from mirage_jax._superoptimize import Superoptimized, superoptimize
from mirage_jax._verify import VerifyResult, verify_equivalent
from mirage_jax.graph import BlockGraph, KernelGraph


def optimize(fun=None, **options):
    """`@mirage_jax.optimize`: run a function's fusible regions as superoptimized kernels.
    Options: config, backend, cache_dir, min_region_flops, static_argnums, static_argnames;
    see mirage_jax._optimize.optimize (imported on first use, so `import mirage_jax` stays
    light)."""
    from mirage_jax._optimize import optimize as _optimize

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

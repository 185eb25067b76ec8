"""verify_equivalent: the finite-field probabilistic equivalence check (cc/verify)."""

from __future__ import annotations

import dataclasses

from mirage_jax import _core
from mirage_jax.ir import args as _args
from mirage_jax.ir.graph import KernelGraph

SHRINK_MODES = ("auto", "always", "never")


@dataclasses.dataclass(frozen=True)
class VerifyResult:
    """The verdict; truthy exactly when the graphs were found equivalent."""

    equivalent: bool
    reason: str  # why not, or "" when equivalent
    trials: int
    false_accept_bound: float  # bound on the chance of accepting a non-equivalent pair
    shrunk: bool  # checked on the shrunk instance (same grids, tiny tiles)

    def __bool__(self) -> bool:
        return self.equivalent


def verify_equivalent(
    a: KernelGraph,
    b: KernelGraph,
    *,
    trials: int | None = None,
    seed: int = 0,
    shrink: str = "auto",
) -> VerifyResult:
    """Evaluates both graphs on the same random inputs over Z_p x Z_q, `trials` times with
    independent primes (None: enough trials for a false-accept bound <= 2^-40).
    `shrink` chooses whether to check on a shrunk instance: "auto" does for large ones.
    Graphs equal over the reals are still not equivalent when one is less safe in floating
    point: it takes exp of a value not bounded above (a softmax without its max), divides or
    takes a square root where the other does not (docs/ir-semantics.md)."""
    for name, graph in (("a", a), ("b", b)):
        if not isinstance(graph, KernelGraph):
            raise TypeError(
                f"verify_equivalent: argument '{name}' must be a mirage_jax KernelGraph, "
                f"got {type(graph).__name__}"
            )
    if trials is None:
        trials = 0  # the C++ default
    else:
        trials = _args.integer(trials, "verify_equivalent", "trials")
        if trials < 1:
            raise ValueError(f"verify_equivalent: argument 'trials' must be >= 1, got {trials}")
    seed = _args.integer(seed, "verify_equivalent", "seed", bits=64)
    if seed < 0:
        raise ValueError(f"verify_equivalent: argument 'seed' must be >= 0, got {seed}")
    shrink = _args.choice(shrink, SHRINK_MODES, "verify_equivalent", "shrink")
    info = _core.verify_equivalent(a._core, b._core, trials, seed, shrink)
    return VerifyResult(
        equivalent=info.equivalent,
        reason=info.reason,
        trials=info.trials,
        false_accept_bound=2.0**info.false_accept_log2,
        shrunk=info.shrunk,
    )

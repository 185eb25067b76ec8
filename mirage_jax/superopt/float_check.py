"""The final float check of a chosen candidate: its outputs at full size, on
random data, against XLA's outputs of the original graph.

The verifier proves candidates equal over finite fields; this check catches what it cannot
see: a code generation bug, and a rewrite that is exact in algebra but unstable in floats.

Error, per output: max|got − want| / max|want|, normwise (relative to the output's largest
magnitude, so elements that cancel to near zero are not held to a relative bound they cannot
meet). Non-finite elements must match exactly (the same NaN positions, the same infinities).

The check runs twice: on standard-normal inputs, and on the same inputs scaled by
STRESS_SCALE, where a candidate that drops a softmax's max stabilizer (which the finite-field
verifier cannot see) overflows while XLA's original stays finite.

Tolerance, per output: max(4·eps(d), 2⁻¹³), where d is the least precise dtype among the
graph's inputs and that output.
- float32 (eps 2⁻²³): 2⁻¹³ ≈ 1.2e-4. Both sides compute in float32 and differ only in the
  order of their sums; reassociating sums of up to ~10⁶ terms stays well inside it, while a
  wrong tile, a dropped term or an unstable rewrite moves the result by far more.
- bfloat16 (eps 2⁻⁷): 3.1e-2; float16 (eps 2⁻¹⁰): 3.9e-3. XLA rounds every intermediate
  tensor it stores to the 16-bit type (up to eps/2 each, relative), a generated kernel only
  its outputs; a few such roundings fit in 4·eps.
- float32 matmuls on TF32 tensor cores (a GPU at jax's default matmul precision, where XLA's
  own dots use TF32 too): both sides round matmul operands to 10 mantissa bits, each its
  own way, so the floor is TF32_FLOOR instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

FLOAT32_FLOOR = 2.0**-13
# 4 x TF32's unit roundoff (2^-11), as 4·eps above: the floor when float32 matmuls may run
# on TF32 tensor cores.
TF32_FLOOR = 2.0**-9
EPS_FACTOR = 4.0
# The second float check runs on the same inputs times this (a power of two, so exact in
# every dtype): products of two inputs grow 256×, enough to push unstabilized exp arguments
# past float32's range (~88) while stabilized programs stay finite.
STRESS_SCALE = 16.0


def tolerance(dtypes: Sequence[str], tf32: bool = False) -> float:
    """The tolerance for an output computed from (and stored in) `dtypes`; `tf32`: float32
    matmuls may have run on TF32 tensor cores."""
    eps = max(float(jnp.finfo(d).eps) for d in dtypes)
    return max(EPS_FACTOR * eps, TF32_FLOOR if tf32 else FLOAT32_FLOOR)


@dataclasses.dataclass(frozen=True)
class FloatCheck:
    """The verdict; truthy when every output is within its tolerance."""

    error: float  # the worst output's error (see the module docstring)
    tolerance: float  # that output's tolerance
    detail: str  # "" when it passed, else which output failed and how

    def __bool__(self):
        return not self.detail

    def __str__(self):
        verdict = "passed" if self else f"FAILED: {self.detail}"
        return (
            f"max error {self.error:.3g} of max|output| (tolerance {self.tolerance:.3g}), {verdict}"
        )


def _error(got: np.ndarray, want: np.ndarray) -> tuple[float, str]:
    if got.shape != want.shape:
        return float("inf"), f"shape {got.shape}, expected {want.shape}"
    finite = np.isfinite(want)
    same_special = np.array_equal(got[~finite], want[~finite], equal_nan=True)
    if not same_special or not np.all(np.isfinite(got[finite])):
        return float("inf"), "non-finite values where XLA has other values"
    if not finite.any():
        return 0.0, ""
    diff = float(np.max(np.abs(got[finite] - want[finite])))
    scale = float(np.max(np.abs(want[finite])))
    return (diff / scale if scale > 0 else diff), ""


def check_outputs(
    got: Sequence, want: Sequence, input_dtypes: Sequence[str], tf32: bool = False
) -> FloatCheck:
    """Compares a candidate's outputs `got` with the original's `want` (XLA's); `tf32`: the
    float32 matmuls of either may have run on TF32 tensor cores."""
    if len(got) != len(want):
        return FloatCheck(float("inf"), 0.0, f"{len(got)} outputs, expected {len(want)}")
    worst = FloatCheck(0.0, tolerance([*input_dtypes, "float32"], tf32), "")
    for i, (g, w) in enumerate(zip(got, want)):
        tol = tolerance([*input_dtypes, str(np.asarray(w).dtype)], tf32)
        error, problem = _error(np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64))
        if problem or error > tol:
            detail = f"output {i}: {problem or f'error {error:.3g} > tolerance {tol:.3g}'}"
            return FloatCheck(error, tol, detail)
        if error / tol >= worst.error / worst.tolerance:
            worst = FloatCheck(error, tol, "")
    return worst

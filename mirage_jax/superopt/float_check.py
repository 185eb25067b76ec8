"""The float checks of a candidate: its outputs at full size against XLA's outputs of the
original graph, on standard-normal inputs and on inputs built to break it.

The verifier proves candidates equal over finite fields; these checks catch what it cannot
see: a code generation bug, and a rewrite that is exact in algebra but unsafe in floats (an
exp without its max stabilizer, a mask applied after the stabilizer, a NaN dropped).

Error, per output: max|got − want| / max|want| over the elements XLA gives finite, normwise
(relative to the output's largest finite magnitude, so elements that cancel to near zero are
not held to a relative bound they cannot meet). Non-finite elements must match exactly: NaN
where XLA has NaN, the same infinities with the same signs, and finite wherever XLA is
finite.

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

The adversarial patterns (AdversarialSuite) are derived from the original graph's structure,
once per graph, and each changes one or a few inputs of the standard-normal set (the other
buffers are reused):
- logits: the inputs that reach an exp's argument, scaled by a power of two (exact) so the
  argument grows to about ±1e4 (a polynomial-degree count over the graph tells how much each
  input contributes). An exp without its stabilizer overflows. Rounding a logit of size L
  costs eps·L, which moves softmax weights by as much, so the finite elements are held to
  the dtype's tolerance grown with L (LOGIT_HEADROOM·4·eps·growth); the non-finite pattern
  is held exactly, and is what this pattern is for.
- masks: inputs added to pre-softmax scores (an add whose other side reaches the exp's
  argument, the input reaching the add through scalar ops only), set to 0 and −inf,
  finfo(dtype).min, −1e9 or −1e10 in rows that cycle through fully masked, left padding,
  right padding and unmasked. Masked scores are exactly the mask value in both programs
  (its ulp dwarfs any score), so a stabilized softmax is exact there in any summation order:
  0 weights on masked keys, uniform weights on a fully masked finite row, NaN on a fully
  −inf row. A softmax stabilized by the max of the unmasked scores gives 0/0 instead.
  (float16's finfo.min is too small to swallow scores: see SWALLOWING_MASK.)
- zeros: each input all zeros; the first and last rows of every input zero at once.
- non-finite: per input, a NaN, a +inf and a −inf in different rows. Infinities only ever
  meet other infinities or finite values of fixed sign, so whether XLA's result is ±inf or
  NaN (inf − inf) does not depend on summation order; no pattern can overflow a finite sum.
At most MAX_PATTERNS patterns run (each one XLA run, computed once per graph, and one
candidate run); the suite records the seconds it took.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mirage_jax.ir.graph import KernelGraph

FLOAT32_FLOOR = 2.0**-13
# 4 x TF32's unit roundoff (2^-11), as 4·eps above: the floor when float32 matmuls may run
# on TF32 tensor cores.
TF32_FLOOR = 2.0**-9
EPS_FACTOR = 4.0
LOGIT_TARGET = 1e4  # the size the logits pattern grows exp arguments to
# Standard-normal inputs give logits of a few units, up to ~4σ and sums of d products: their
# rounding error at growth F is a small multiple of eps·F, held within this many times 4·eps·F.
LOGIT_HEADROOM = 16.0
MASK_VALUES = ("-inf", "finfo.min", "-1e9", "-1e10")
# A finite mask value at least this large swallows any score (half its float32 ulp is 32), so
# a masked score is the mask value whether a program rounds it to a 16-bit type or not.
# float16's finfo.min (65504) is smaller: XLA's float16 sum rounds s + m to m, a kernel that
# adds in float32 keeps s, and both are right; there only the non-finite elements count.
SWALLOWING_MASK = 2.0**29
MAX_PATTERNS = 24
MAX_INPUTS_PER_ROLE = 4  # inputs given per-input patterns (zeros, non-finite, masks)


def tolerance(dtypes: Sequence[str], tf32: bool = False) -> float:
    """The tolerance for an output computed from (and stored in) `dtypes`; `tf32`: float32
    matmuls may have run on TF32 tensor cores."""
    return max(EPS_FACTOR * _eps(dtypes), TF32_FLOOR if tf32 else FLOAT32_FLOOR)


def _eps(dtypes: Sequence[Any]) -> float:
    return max(float(jnp.finfo(d).eps) for d in dtypes)


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


def _at(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _error(got: np.ndarray, want: np.ndarray) -> tuple[float, str, tuple[int, ...] | None]:
    """(normwise error over XLA's finite elements, the problem, the position of the worst
    element) — the problem is "" when the non-finite elements match."""
    if got.shape != want.shape:
        return float("inf"), f"shape {got.shape}, expected {want.shape}", None
    finite = np.isfinite(want)
    with np.errstate(invalid="ignore"):
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        special_ok = np.where(finite, np.isfinite(got), same)
    if not special_ok.all():
        bad = tuple(np.argwhere(~special_ok)[0])
        count = int((~special_ok).sum())
        return (
            float("inf"),
            f"{count} element(s) non-finite where XLA differs, first at {_at(bad)}: "
            f"got {got[bad]}, XLA {want[bad]}",
            bad,
        )
    if not finite.any():
        return 0.0, "", None
    diff = np.abs(np.where(finite, got, 0.0) - np.where(finite, want, 0.0))
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
    scale = float(np.max(np.abs(want[finite])))
    error = float(diff[worst])
    return (error / scale if scale > 0 else error), "", worst


def check_outputs(
    got: Sequence,
    want: Sequence,
    input_dtypes: Sequence[str],
    growth: float = 1.0,
    tf32: bool = False,
) -> FloatCheck:
    """Compares a candidate's outputs `got` with the original's `want` (XLA's). growth: how
    much the inputs grew the values every rounding is relative to (the logits pattern); the
    tolerance grows with it (see the module docstring); inf compares the non-finite
    elements only. `tf32`: the float32 matmuls of either may have run on TF32 tensor cores."""
    if len(got) != len(want):
        return FloatCheck(float("inf"), 0.0, f"{len(got)} outputs, expected {len(want)}")
    worst = FloatCheck(0.0, tolerance([*input_dtypes, "float32"], tf32), "")
    for i, (g, w) in enumerate(zip(got, want)):
        dtypes = [*input_dtypes, str(np.asarray(w).dtype)]
        tol = tolerance(dtypes, tf32)
        if growth > 1:
            tol = max(tol, LOGIT_HEADROOM * EPS_FACTOR * _eps(dtypes) * growth)
        gv, wv = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        error, problem, where = _error(gv, wv)
        if problem:
            return FloatCheck(error, tol, f"output {i}: {problem}")
        if error > tol:
            assert where is not None
            detail = (
                f"output {i}: error {error:.3g} > tolerance {tol:.3g}, worst at {_at(where)}: "
                f"got {gv[where]:.6g}, XLA {wv[where]:.6g}"
            )
            return FloatCheck(error, tol, detail)
        if error / tol >= worst.error / worst.tolerance:
            worst = FloatCheck(error, tol, "")
    return worst


# -- the roles of inputs, from the graph's structure ---------------------------------------


def _exp_arguments(kg: KernelGraph) -> set[int]:
    return {op.inputs[0].id for op in kg.ops if op.kind == "exp"}


def _ancestors(kg: KernelGraph, tensors: set[int]) -> set[int]:
    """Every tensor some of `tensors` is computed from (they included)."""
    seen = set(tensors)
    for op in reversed(kg.ops):
        if any(t.id in seen for t in op.outputs):
            seen.update(t.id for t in op.inputs)
    return seen


_SCALAR_OPS = frozenset({"mul_scalar", "add_scalar", "neg"})


def _mask_inputs(kg: KernelGraph) -> list[int]:
    """Inputs added to a value that reaches an exp's argument, through scalar ops only: the
    additive masks of pre-softmax scores."""
    exp_args = _exp_arguments(kg)
    if not exp_args:
        return []
    upstream = _ancestors(kg, exp_args)
    input_ids = [t.id for t in kg.inputs]
    source: dict[int, int] = {tid: i for i, tid in enumerate(input_ids)}  # tensor -> input
    masks: list[int] = []
    for op in kg.ops:
        if op.kind in _SCALAR_OPS and op.inputs[0].id in source:
            source[op.outputs[0].id] = source[op.inputs[0].id]
        if op.kind in ("add", "sub") and op.outputs[0].id in upstream:
            for side, other in ((0, 1), (1, 0)):
                tid = op.inputs[side].id
                mask = source.get(tid)
                if mask is not None and op.inputs[other].id not in source and mask not in masks:
                    masks.append(mask)
    return masks


def _select_mask_inputs(kg: KernelGraph) -> list[int]:
    """The inputs that are select masks (jnp.where(mask, x, c), mask as 0/1): standard-normal
    values are all nonzero, which would never take the fill."""
    input_ids = [t.id for t in kg.inputs]
    masks: list[int] = []
    for op in kg.ops:
        if op.kind == "select" and op.inputs[1].id in input_ids:
            i = input_ids.index(op.inputs[1].id)
            if i not in masks:
                masks.append(i)
    return masks


def _keep_mask(variant: int) -> Callable[[np.ndarray], np.ndarray]:
    """A select mask of 0/1: the padding pattern of _padding_mask, 0 where it masks."""
    masked = _padding_mask(1.0, variant)
    return lambda x: (masked(x) == 0).astype(np.float32)


def _degree(kg: KernelGraph, scaled: set[int]) -> float:
    """The largest polynomial degree, in a common factor c of the `scaled` inputs, of any
    exp argument: scaling those inputs by c scales the exp arguments by about c**degree.
    Nonlinear ops (and rms_norm, which undoes any scale) count as degree 0."""
    deg: dict[int, float] = {t.id: (1.0 if i in scaled else 0.0) for i, t in enumerate(kg.inputs)}

    def d(t: Any) -> float:
        return deg.get(t.id, 0.0)

    for op in kg.ops:
        if op.kind in ("input", "output"):
            continue
        ins = [d(t) for t in op.inputs]
        kind = op.kind
        if kind in ("matmul", "mul"):
            value = ins[0] + ins[1]
        elif kind == "div":
            value = ins[0] - ins[1]
        elif kind == "square":
            value = 2 * ins[0]
        elif kind == "sqrt":
            value = ins[0] / 2
        elif kind == "rsqrt":
            value = -ins[0] / 2
        elif kind == "recip":
            value = -ins[0]
        elif kind in ("exp", "sigmoid", "silu", "gelu", "gelu_erf", "erf", "erfc", "rms_norm"):
            value = 0.0
        elif kind == "select":  # x or a constant: the mask does not scale it
            value = ins[0]
        else:  # add, sub, scalar ops, reductions, concat, relu, customized
            value = max(ins, default=0.0)
        for t in op.outputs:
            deg[t.id] = value
    return max((d_ for t, d_ in deg.items() if t in _exp_arguments(kg)), default=0.0)


# -- the patterns -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Pattern:
    """One adversarial input set: `changed` replaces some of the standard-normal inputs."""

    name: str  # the check, as a warning names it
    changed: dict[int, Callable[[np.ndarray], np.ndarray]]  # input -> new values from old
    growth: float = 1.0  # how much the pattern grows the logits (see check_outputs)


def _rows(x: np.ndarray) -> np.ndarray:
    """x as [rows, last dim] (a view)."""
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def _mask_value(name: str, dtype: str) -> float:
    if name == "finfo.min":
        return float(jnp.finfo(dtype).min)
    return float(name)


def _padding_mask(value: float, variant: int) -> Callable[[np.ndarray], np.ndarray]:
    """Rows cycling through fully masked, left padding, right padding, unmasked (the cycle
    starts at `variant`); the padding length varies from row to row, and every partly masked
    row keeps one key. A mask of one row (broadcast over the queries) is fully masked, left-
    or right-padded by variant."""

    def make(x: np.ndarray) -> np.ndarray:
        m = np.zeros_like(x)
        rows = _rows(m)
        n = rows.shape[1]
        for r in range(rows.shape[0]):
            pad = (r // 4) % max(n - 1, 1) + 1 if n > 1 else 0
            kind = (r + variant) % 4 if rows.shape[0] > 1 else variant % 3
            if kind == 0:
                rows[r, :] = value
            elif kind == 1:
                rows[r, : min(pad, n - 1)] = value
            elif kind == 2:
                rows[r, n - min(pad, n - 1) :] = value
        return m

    return make


def _scaled(x: np.ndarray, c: float) -> np.ndarray:
    return x * np.float32(c)


def _zero_rows(x: np.ndarray) -> np.ndarray:
    z = x.copy()
    rows = _rows(z)
    rows[0] = 0
    rows[-1] = 0
    return z


def _non_finite(x: np.ndarray) -> np.ndarray:
    z = x.copy()
    rows = _rows(z)
    r, n = rows.shape
    rows[0, 0] = np.nan
    rows[r // 2, n // 2] = np.inf
    rows[r - 1, n - 1] = -np.inf
    return z


def patterns(kg: KernelGraph) -> list[Pattern]:
    """The adversarial patterns for `kg`, most telling first, at most MAX_PATTERNS."""
    dtypes = [t.dtype for t in kg.inputs]
    found: list[Pattern] = []
    masks = _mask_inputs(kg)
    exp_args = _exp_arguments(kg)
    if exp_args:
        logit_inputs = {
            i
            for i, t in enumerate(kg.inputs)
            if i not in masks and t.id in _ancestors(kg, exp_args)
        }
        degree = _degree(kg, logit_inputs)
        if logit_inputs and degree > 0:
            target = min(LOGIT_TARGET, min(float(jnp.finfo(d).max) for d in dtypes) / 64)
            c = 2.0 ** round(math.log2(target) / degree)
            growth = c**degree
            found.append(
                Pattern(
                    f"logits ×{growth:g} (inputs {sorted(logit_inputs)} ×{c:g})",
                    dict.fromkeys(sorted(logit_inputs), functools.partial(_scaled, c=c)),
                    growth,
                )
            )
    for i in masks[:MAX_INPUTS_PER_ROLE]:
        for variant, v in enumerate(MASK_VALUES):
            value = float(np.asarray(_mask_value(v, dtypes[i]), dtype=jnp.dtype(dtypes[i])))
            exact = not math.isfinite(value) or abs(value) >= SWALLOWING_MASK
            found.append(
                Pattern(
                    f"additive mask {v} (fully masked, left- and right-padded rows) on input {i}"
                    + ("" if exact else ", non-finite elements only"),
                    {i: _padding_mask(value, variant)},
                    1.0 if exact else math.inf,
                )
            )
    selects = _select_mask_inputs(kg)
    for i in selects[:MAX_INPUTS_PER_ROLE]:
        for variant in range(2):
            found.append(
                Pattern(
                    f"select mask of 0/1 (fully masked, left- and right-padded rows) on input {i}",
                    {i: _keep_mask(variant)},
                )
            )
    per_input = range(min(len(kg.inputs), MAX_INPUTS_PER_ROLE))
    found.append(
        Pattern(
            "zeros in the first and last rows of every input",
            dict.fromkeys(range(len(kg.inputs)), _zero_rows),
        )
    )
    found += [Pattern(f"NaN, +inf and -inf in input {i}", {i: _non_finite}) for i in per_input]
    found += [Pattern(f"input {i} all zeros", {i: np.zeros_like}) for i in per_input]
    return found[:MAX_PATTERNS]


class AdversarialSuite:
    """The patterns of one graph with XLA's outputs on them, computed on first use and kept,
    so every candidate of the graph is run against the same references."""

    def __init__(
        self,
        kg: KernelGraph,
        xla_fn: Callable[..., Any],
        inputs: Sequence[jax.Array],
        device: Any = None,
        tf32: bool = False,
    ):
        self.kg, self.xla_fn, self.inputs, self.device = kg, xla_fn, list(inputs), device
        self.tf32 = tf32
        self.dtypes = [t.dtype for t in kg.inputs]
        self.patterns = patterns(kg)
        self._host: dict[int, np.ndarray] = {}
        self._cases: list[tuple[list[jax.Array], Any] | None] = [None] * len(self.patterns)
        self.seconds = 0.0  # time spent in the suite, XLA's runs included

    def _host_input(self, i: int) -> np.ndarray:
        if i not in self._host:
            self._host[i] = np.asarray(self.inputs[i], dtype=np.float32)
        return self._host[i]

    def _case(self, k: int) -> tuple[list[jax.Array], Any]:
        case = self._cases[k]
        if case is None:
            args = list(self.inputs)
            for i, make in self.patterns[k].changed.items():
                values = make(self._host_input(i))
                args[i] = jax.device_put(jnp.asarray(values, dtype=self.dtypes[i]), self.device)
            case = (args, jax.block_until_ready(self.xla_fn(*args)))
            self._cases[k] = case
        return case

    def check(self, candidate_fn: Callable[..., Any]) -> tuple[FloatCheck, str]:
        """(the first failing pattern's verdict, its name), or (the passing verdict nearest
        its tolerance, "")."""
        start = time.perf_counter()
        try:
            worst = FloatCheck(0.0, tolerance([*self.dtypes, "float32"], self.tf32), "")
            for k, pattern in enumerate(self.patterns):
                args, want = self._case(k)
                got = jax.block_until_ready(candidate_fn(*args))
                verdict = check_outputs(got, want, self.dtypes, pattern.growth, self.tf32)
                if not verdict:
                    return verdict, pattern.name
                if verdict.error / verdict.tolerance > worst.error / worst.tolerance:
                    worst = verdict
            return worst, ""
        finally:
            self.seconds += time.perf_counter() - start

"""Random JAX programs for differential testing of @mirage_jax.optimize against jax.jit
(tests/e2e/test_fuzz.py runs a hundred, benchmarks/fuzz.py a thousand).

A program is Python source, deterministic by seed, so a failure is replayed from its seed or
its printed source. Programs are built as models write them: matmuls (rank-3 activations
times rank-2 weights too), biases, residuals, RMSNorm and LayerNorm (with jnp.var), the
activations (silu, gelu tanh and erf, relu, sigmoid, tanh), elementwise chains, reductions,
softmax with no mask, an additive mask or a jnp.where mask; float32 and bfloat16; odd and
aligned shapes. Shapes are small and fixed per kind (one aligned set, one odd), so that
programs share regions and the search and kernel caches serve many of them: compiling a
kernel takes seconds, and that is most of a program's time.

Each program runs on standard-normal inputs and on adversarial ones: the additive-mask
patterns of the superoptimizer's float check (mirage_jax/superopt/float_check.py: −inf,
finfo.min, −1e9, −1e10, in fully masked, left- and right-padded rows), the same rows for a
boolean mask, zeros, and NaN/±inf in the activations. It must give jax.jit's result within
the dtype's tolerance and NaN/±inf exactly where jax.jit has them.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

import mirage_jax as mj
from mirage_jax.rewrite import region as _region
from mirage_jax.runtime import profile as _profile
from mirage_jax.superopt import config as _config
from mirage_jax.superopt import float_check as fc
from mirage_jax.superopt import superoptimize as _superoptimize

ACTIVATIONS = {
    "silu": "jax.nn.silu({})",
    "gelu_tanh": "jax.nn.gelu({}, approximate=True)",
    "gelu_erf": "jax.nn.gelu({}, approximate=False)",
    "relu": "jax.nn.relu({})",
    "sigmoid": "jax.nn.sigmoid({})",
    "tanh": "jnp.tanh({})",
}
ELEMENTWISE = [
    "{} * 0.5 + 1.0",
    "{} * {}",
    "jnp.square({}) * 0.25",
    "1.0 / (1.0 + {} * {})",
    "jnp.exp(-{} * {})",
    "jnp.sqrt({} * {} + 1.0)",
]
# Small search limits: what matters is that whatever is kept is right. One candidate is
# compiled per region (top_k=1) and timing rounds are short.
MLP_CONFIG = dataclasses.replace(_config.MLP, time_budget_s=4, max_verified=2, threads=1)
ATTENTION_CONFIG = dataclasses.replace(
    _config.ATTENTION, time_budget_s=4, max_verified=2, threads=1
)


@dataclasses.dataclass
class Arg:
    name: str
    shape: tuple[int, ...]
    role: str  # "x" (activations), "weight", "bias", "gain", "mask_add", "mask_bool"
    dtype: str


@dataclasses.dataclass
class FuzzProgram:
    seed: int
    kind: str
    dtype: str
    args: list[Arg]
    source: str

    @functools.cached_property
    def fn(self) -> Callable[..., Any]:
        scope: dict[str, Any] = {"jax": jax, "jnp": jnp}
        exec(compile(self.source, f"<fuzz program {self.seed}>", "exec"), scope)
        return scope["f"]

    @property
    def attention(self) -> bool:
        return self.kind == "attention"


class _Writer:
    def __init__(self, rng: random.Random, dtype: str):
        self.rng, self.dtype = rng, dtype
        self.args: list[Arg] = []
        self.lines: list[str] = []
        self.n = 0

    def arg(self, prefix: str, shape: tuple[int, ...], role: str) -> str:
        name = f"{prefix}{len(self.args)}"
        dtype = "bool" if role == "mask_bool" else self.dtype
        self.args.append(Arg(name, shape, role, dtype))
        return name

    def let(self, expr: str) -> str:
        self.n += 1
        name = f"h{self.n}"
        self.lines.append(f"    {name} = {expr}")
        return name

    def activation(self, h: str) -> str:
        return self.let(ACTIVATIONS[self.rng.choice(sorted(ACTIVATIONS))].format(h))

    def elementwise(self, h: str) -> str:
        form = self.rng.choice(ELEMENTWISE)
        return self.let(form.format(*([h] * form.count("{}"))))

    def linear(self, h: str, d_in: int, d_out: int, bias: bool | None = None) -> str:
        w = self.arg("w", (d_in, d_out), "weight")
        out = f"{h} @ {w}"
        if bias if bias is not None else self.rng.random() < 0.4:
            out += f" + {self.arg('b', (d_out,), 'bias')}"
        return self.let(out)

    def norm(self, h: str, d: int) -> str:
        g = self.arg("g", (d,), "gain")
        if self.rng.random() < 0.5:
            ms = self.let(f"jnp.mean({h} * {h}, axis=-1, keepdims=True)")
            return self.let(f"{h} * jax.lax.rsqrt({ms} + 1e-6) * {g}")
        b = self.arg("b", (d,), "bias")
        mu = self.let(f"jnp.mean({h}, axis=-1, keepdims=True)")
        var = self.let(f"jnp.var({h}, axis=-1, keepdims=True)")
        return self.let(f"({h} - {mu}) * jax.lax.rsqrt({var} + 1e-5) * {g} + {b}")


def generate(seed: int) -> FuzzProgram:
    """The program of `seed` (the same source on every machine)."""
    rng = random.Random(seed)
    dtype = "bfloat16" if rng.random() < 0.3 else "float32"
    odd = rng.random() < 0.3
    kind = rng.choice(["mlp", "norm_linear", "chain_reduce", "attention", "attention"])
    w = _Writer(rng, dtype)
    rows = 6 if odd else 8
    d = 12 if odd else 16
    lead = rng.choice([(), (), (2,)])
    outputs: list[str] = []
    if kind == "attention":
        heads = 2
        q_len, kv_len, hd = rows, 12 if odd else 16, 4
        q = w.arg("q", (heads, q_len, hd), "x")
        k = w.arg("k", (heads, kv_len, hd), "x")
        v = w.arg("v", (heads, kv_len, hd), "x")
        s = w.let(f"jnp.einsum('hqd,hkd->hqk', {q}, {k}) * {float(1 / np.sqrt(hd))!r}")
        mask = rng.choice(["none", "add", "add", "where"])
        if mask == "add":
            shape = rng.choice([(q_len, kv_len), (heads, q_len, kv_len)])
            s = w.let(f"{s} + {w.arg('m', shape, 'mask_add')}")
        elif mask == "where":
            m = w.arg("m", (q_len, kv_len), "mask_bool")
            fill = rng.choice(["-1e9", f"jnp.finfo({s}.dtype).min"])
            s = w.let(f"jnp.where({m}, {s}, {fill})")
        p = w.let(f"jax.nn.softmax({s}, axis=-1)")
        o = w.let(f"{p} @ {v}")
        if rng.random() < 0.4:
            o = w.let(f"{o} @ {w.arg('w', (hd, hd), 'weight')}")
        outputs.append(o)
    else:
        x = w.arg("x", (*lead, rows, d), "x")
        h = x
        if kind == "norm_linear":
            h = w.norm(h, d)
            d_out = 10 if odd else 8
            h = w.linear(h, d, d_out)
            if rng.random() < 0.5:
                h = w.activation(h)
        elif kind == "mlp":
            f = 2 * d
            up = w.linear(h, d, f, bias=False)
            if rng.random() < 0.5:  # gated
                gate = w.linear(h, d, f, bias=False)
                mid = w.let(f"{w.activation(gate)} * {up}")
            else:
                mid = w.activation(up)
            down = w.linear(mid, f, d)
            h = w.let(f"{x} + {down}") if rng.random() < 0.6 else down
        else:  # chain_reduce
            d_out = 10 if odd else 8
            h = w.linear(h, d, d_out)
            for _ in range(rng.randint(1, 3)):
                h = w.elementwise(h) if rng.random() < 0.5 else w.activation(h)
            reduce = rng.choice(["sum", "mean", "max", "softmax", "none"])
            if reduce == "softmax":
                h = w.let(f"jax.nn.softmax({h}, axis=-1)")
            elif reduce != "none":
                outputs.append(w.let(f"jnp.{reduce}({h}, axis=-1)"))
        outputs.insert(0, h)
    params = ", ".join(a.name for a in w.args)
    ret = outputs[0] if len(outputs) == 1 else "(" + ", ".join(outputs) + ")"
    source = "\n".join([f"def f({params}):", *w.lines, f"    return {ret}", ""])
    return FuzzProgram(seed, kind, dtype, w.args, source)


# -- inputs -------------------------------------------------------------------------------


def normal_inputs(program: FuzzProgram, seed: int = 0) -> list[np.ndarray]:
    """Standard-normal activations, weights scaled by 1/sqrt(fan-in), gains near 1, masks
    of zeros (additive) or mostly True (boolean)."""
    rng = np.random.default_rng(seed)
    values = []
    for a in program.args:
        if a.role == "mask_bool":
            values.append(rng.random(a.shape) < 0.8)
            continue
        x = rng.standard_normal(a.shape)
        if a.role == "weight":
            x /= np.sqrt(a.shape[0])
        elif a.role == "gain":
            x = 1.0 + 0.1 * x
        elif a.role == "mask_add":
            x = np.zeros(a.shape)
        values.append(x.astype(np.float32))
    return values


def _bool_padding(x: np.ndarray, variant: int) -> np.ndarray:
    """The rows of float_check's padding masks as a keep-mask (True keeps a key)."""
    return fc._padding_mask(1.0, variant)(np.zeros(x.shape, np.float32)) == 0


def adversarial_inputs(program: FuzzProgram) -> Iterator[tuple[str, list[np.ndarray]]]:
    """(pattern name, inputs): masks padded with each of float_check's values, zeros, and
    NaN/±inf in the first activation."""
    base = normal_inputs(program)
    for i, a in enumerate(program.args):
        if a.role == "mask_add":
            for variant, value in enumerate(fc.MASK_VALUES):
                make = fc._padding_mask(fc._mask_value(value, a.dtype), variant)
                yield f"additive mask {value} on {a.name}", _replace(base, i, make(base[i]))
        elif a.role == "mask_bool":
            for variant in range(4):
                yield (
                    f"boolean padding mask {variant} on {a.name}",
                    _replace(base, i, _bool_padding(base[i], variant)),
                )
    first = next(i for i, a in enumerate(program.args) if a.role == "x")
    yield "zero rows", _replace(base, first, fc._zero_rows(base[first]))
    yield "NaN, +inf and -inf", _replace(base, first, fc._non_finite(base[first]))


def _replace(values: list[np.ndarray], i: int, new: np.ndarray) -> list[np.ndarray]:
    out = list(values)
    out[i] = new
    return out


# -- running one program ----------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    seed: int
    status: str  # "ok", "mismatch" or "crash"
    used_kernels: bool
    detail: str  # the failure; for a program that passed, what became of its regions
    source: str
    seconds: float


def _device_args(program: FuzzProgram, values: list[np.ndarray]) -> list[jax.Array]:
    return [jnp.asarray(v, dtype=a.dtype) for v, a in zip(values, program.args)]


def _outputs(y: Any) -> list[np.ndarray]:
    return [np.asarray(leaf, np.float64) for leaf in jax.tree_util.tree_leaves(y)]


def run_program(program: FuzzProgram, cache_dir: str) -> Outcome:
    """optimize(program) against jax.jit(program), kernels kept whatever the timing says
    ($MIRAGE_JAX_KEEP_KERNELS=1 must be set by the caller)."""
    start = time.perf_counter()
    config = ATTENTION_CONFIG if program.attention else MLP_CONFIG
    tol_dtypes = [program.dtype]
    try:
        with (
            mock.patch.object(
                _region, "superoptimize", functools.partial(_superoptimize.superoptimize, top_k=1)
            ),
            mock.patch.object(_profile, "BUDGET_S", 0.02),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            f = mj.optimize(program.fn, config=config, cache_dir=cache_dir)
            reference = jax.jit(program.fn)
            cases = [("standard normal", normal_inputs(program)), *adversarial_inputs(program)]
            used = False
            for name, values in cases:
                args = _device_args(program, values)
                want = _outputs(reference(*args))
                got = _outputs(f(*args))
                if name == "standard normal":
                    used = f.uses_kernels(*args)
                    regions = "; ".join(
                        r.headline() for r in f._specialization(tuple(args), {})[0].reports
                    )
                verdict = fc.check_outputs(got, want, tol_dtypes)
                if not verdict:
                    return Outcome(
                        program.seed,
                        "mismatch",
                        used,
                        f"{name}: {verdict.detail}",
                        program.source,
                        time.perf_counter() - start,
                    )
    except Exception as e:
        detail = "".join(traceback.format_exception_only(type(e), e)).strip()[:2000]
        return Outcome(
            program.seed, "crash", False, detail, program.source, time.perf_counter() - start
        )
    return Outcome(program.seed, "ok", used, regions, program.source, time.perf_counter() - start)

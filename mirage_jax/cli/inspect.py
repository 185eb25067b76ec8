"""python -m mirage_jax inspect TARGET: optimize a function for example arguments and print
what became of each region (Optimized.explain).

TARGET is MODULE:FUNCTION (an importable module, or a path ending in .py) where FUNCTION
may be dotted (Class.method, obj.attr). It may already be decorated with @mj.optimize (its
own options are used unless --backend/--min-region-flops/--budget are given).

The example arguments come from, first found:
  1. --arg SPEC, once per positional argument: an array of DTYPE and SHAPE filled with
     standard-normal values (--seed), e.g. f32[8,256], bf16[64], float32[] (a scalar);
  2. --args MODULE:CALLABLE (or :CALLABLE, in TARGET's module): a callable returning the
     positional arguments as a tuple, or a dict {"args": (...), "kwargs": {...}};
  3. the function's own `example_args` attribute: such a callable, or the tuple itself.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import re
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mirage_jax.rewrite.decorator import DEFAULT_CONFIG, Optimized, optimize

_DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f64": "float64",
    "i32": "int32",
    "i64": "int64",
}
_SPEC = re.compile(r"^\s*([A-Za-z0-9_]+)\s*\[\s*([0-9,\s]*)\]\s*$")


class InspectError(Exception):
    """Bad usage, named: exit status 2."""


def parse_spec(spec: str):
    """ "f32[8,256]" -> (shape, dtype name)."""
    m = _SPEC.match(spec)
    if not m:
        raise InspectError(
            f"--arg {spec!r}: expected DTYPE[D0,D1,...] such as f32[8,256] or bf16[] for a scalar"
        )
    name = _DTYPES.get(m[1], m[1])
    try:
        dtype = jnp.dtype(name)
    except TypeError:
        raise InspectError(
            f"--arg {spec!r}: unknown dtype {m[1]!r} (use f32, bf16, f16, "
            f"f64, i32, i64 or a numpy dtype name)"
        ) from None
    dims = [d for d in m[2].replace(" ", "").split(",") if d]
    shape = tuple(int(d) for d in dims)
    if any(d <= 0 for d in shape):
        raise InspectError(f"--arg {spec!r}: every dim must be positive")
    np.dtype(dtype)  # a real numpy dtype
    return shape, dtype


def _load_module(name: str):
    if name.endswith(".py"):
        if not os.path.exists(name):
            raise InspectError(f"no file {name!r}")
        modname = os.path.splitext(os.path.basename(name))[0]
        spec = importlib.util.spec_from_file_location(modname, name)
        if spec is None or spec.loader is None:
            raise InspectError(f"{name!r} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise InspectError(f"cannot import module {name!r}: {e}") from None


def resolve(target: str, default_module=None):
    """(the object named by MODULE:NAME or :NAME, its module)."""
    if ":" not in target:
        raise InspectError(f"{target!r}: expected MODULE:FUNCTION, e.g. mypkg.model:forward")
    modname, _, attr = target.rpartition(":")
    if not attr:
        raise InspectError(f"{target!r}: no function name after ':'")
    module = _load_module(modname) if modname else default_module
    if module is None:
        raise InspectError(f"{target!r}: no module before ':'")
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InspectError(f"{module.__name__} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj, module


def example_arguments(fn, module, specs, args_from, seed):
    """(args, kwargs) from --arg specs, --args, or fn.example_args (module doc)."""
    if specs:
        rng = np.random.default_rng(seed)
        args = []
        for spec in specs:
            shape, dtype = parse_spec(spec)
            args.append(jnp.asarray(rng.standard_normal(shape), dtype))
        return tuple(args), {}
    source = None
    if args_from:
        source, _ = resolve(args_from, module)
    else:
        source = getattr(fn, "example_args", None)
        if source is None:
            raise InspectError(
                "no example arguments: give --arg DTYPE[SHAPE] per positional argument, "
                "--args MODULE:CALLABLE, or set the function's example_args attribute"
            )
    value = source() if callable(source) else source
    if isinstance(value, dict) and set(value) <= {"args", "kwargs"}:
        return tuple(value.get("args", ())), dict(value.get("kwargs", {}))
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    raise InspectError(
        f"the example arguments must be a tuple or a dict with 'args' and "
        f"'kwargs', got {type(value).__name__}"
    )


def run_inspect(
    target: str, specs=(), args_from=None, seed=0, backend=None, min_region_flops=None, budget=None
) -> int:
    try:
        fn, module = resolve(target)
        args, kwargs = example_arguments(fn, module, specs, args_from, seed)
    except InspectError as e:
        print(f"python -m mirage_jax inspect: {e}", file=sys.stderr)
        return 2
    if not callable(fn):
        print(f"python -m mirage_jax inspect: {target} is not callable", file=sys.stderr)
        return 2
    options: dict[str, Any] = {}
    if isinstance(fn, Optimized):
        options = dict(
            config=fn._config,
            backend=fn._backend,
            cache_dir=fn._cache_dir,
            min_region_flops=fn._min_region_flops,
            static_argnums=fn._static_argnums,
            static_argnames=fn._static_argnames,
        )
        fn = fn._fun
    if backend is not None:
        options["backend"] = backend
    if min_region_flops is not None:
        options["min_region_flops"] = min_region_flops
    if budget is not None:
        options["config"] = dataclasses.replace(
            options.get("config") or DEFAULT_CONFIG, time_budget_s=float(budget)
        )
    opt = optimize(fn, **options)
    print(
        f"== {target}: {len(args)} positional argument(s)"
        + "".join(f"\n   {_describe(a)}" for a in args)
        + "\n"
    )
    opt.explain(*args, **kwargs)
    return 0


def _describe(x) -> str:
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None:
        leaves = jax.tree_util.tree_leaves(x)
        return f"{type(x).__name__} with {len(leaves)} leaves"
    return f"{dtype}{list(shape)}"

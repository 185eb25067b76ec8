"""The model zoo: four models written as their users write them (Flax nnx, Flax linen,
Equinox), the yardstick of mirage_jax.optimize on real model code.

    llama  a Llama-style decoder in Flax nnx: prefill, decode_b1/b4/b8 (KV cache),
           generate_b4 (the decode step in a while_loop sampler)
    gpt2   a GPT-2-style decoder in Flax linen: prefill, decode_b1/b4/b8 (Flax cache),
           generate_b4 (the decode step in a fori_loop sampler)
    bert   a BERT-like encoder with padding masks in Flax linen: encode
    vit    a ViT-style image encoder in Equinox (the optional "models" extra): encode

Each model module has CONFIGS ("tiny" for tests, "small" for the benchmark), modes(config),
build(mode, config, dtype) -> (fn, params, example inputs) and padded_inputs(mode, config,
dtype); `case` packages one of them as a common.Case. Weights are random from fixed seeds.
"""

from __future__ import annotations

import importlib

from . import check, common
from .common import DTYPES, Case

MODULES = {"llama": "llama_nnx", "gpt2": "gpt2_linen", "bert": "bert_linen", "vit": "vit_equinox"}
SIZES = ("tiny", "small")


def module(model: str):
    """The module of `model`; ImportError when its library (equinox for vit) is missing."""
    if model not in MODULES:
        raise ValueError(f"unknown zoo model {model!r}; known: {', '.join(MODULES)}")
    return importlib.import_module(f".{MODULES[model]}", __name__)


def unavailable() -> dict:
    """{model: why it cannot be imported here} (e.g. equinox not installed)."""
    missing = {}
    for model in MODULES:
        try:
            module(model)
        except ImportError as e:
            missing[model] = f"{type(e).__name__}: {e}"
    return missing


def case_names(size: str = "small", models=None) -> list[str]:
    """ "<model>_<mode>" of every mode of every available model (or of `models`)."""
    names = []
    for model in models or MODULES:
        try:
            mod = module(model)
        except ImportError:
            continue
        names += [f"{model}_{mode}" for mode in mod.modes(mod.CONFIGS[size])]
    return names


def case(name: str, size: str = "small", dtype: str = "f32") -> Case:
    """The Case "<model>_<mode>" at `size` ("tiny" or "small") and `dtype` ("f32", "bf16")."""
    model, _, mode = name.partition("_")
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; known: {', '.join(SIZES)}")
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
    mod = module(model)
    cfg = mod.CONFIGS[size]
    if mode not in mod.modes(cfg):
        raise ValueError(f"unknown mode {mode!r} of {model}; known: {', '.join(mod.modes(cfg))}")
    jdtype = DTYPES[dtype]
    fn, params, inputs = mod.build(mode, cfg, jdtype)
    padded = mod.padded_inputs(mode, cfg, jdtype)
    first_line = (mod.__doc__ or model).strip().splitlines()[0].rstrip(".")
    return Case(model, mode, size, dtype, fn, params, tuple(inputs), tuple(padded), first_line)


__all__ = [
    "DTYPES",
    "MODULES",
    "SIZES",
    "Case",
    "case",
    "case_names",
    "check",
    "common",
    "module",
    "unavailable",
]

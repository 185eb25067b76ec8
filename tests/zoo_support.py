"""Importing the model zoo of benchmarks/models/ from the tests (it is not part of the
package), and the search limits the zoo's tests give every region."""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def import_benchmark_module(name: str):
    """benchmarks/<name> (a module or a package), imported as the benchmark scripts do."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


def zoo():
    return import_benchmark_module("models")


def zoo_case(name: str, dtype: str):
    """The tiny Case `name` (built once per session: a Case is immutable); skipped when its
    library (equinox for vit) is not installed."""
    if name.split("_")[0] == "vit":
        pytest.importorskip("equinox", reason="the vit zoo model needs the 'models' extra")
    return _case(name, dtype)


@functools.cache
def _case(name: str, dtype: str):
    return zoo().case(name, "tiny", dtype)


def search_config():
    """Enough to find the tiny zoo regions' kernels, few enough to keep each test short."""
    import mirage_jax as mj

    return mj.SearchConfig(max_kernel_ops=1, max_block_ops=5, time_budget_s=2, max_verified=4)


# Every tiny case: each decoder's prefill, decode step and sampling loop, each encoder.
CASES = (
    "llama_prefill",
    "llama_decode_b4",
    "llama_generate_b4",
    "gpt2_prefill",
    "gpt2_decode_b4",
    "gpt2_generate_b4",
    "bert_encode",
    "vit_encode",
)

"""Input sets that make each timed call read its inputs from memory, not from the cache.

A region timed alone in a loop reads the same few megabytes every call, which then sit in
the last-level cache; inside a model whose weights are many times that cache (a decode step
streams every layer's weights), the same region reads them from memory. XLA's dots and the
kernels do not slow down alike between the two (on the 2-core development machine GPT-2's
decode regions timed warm called XLA's GEMVs as fast as the kernels, and the rewritten step
with the kernels was 1.1–1.3× faster than jax.jit), so a region of such a program is timed
cold: its calls rotate over copies of its inputs that together hold twice the cache.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

FALLBACK_CACHE_BYTES = 32 * 2**20  # when the system does not say
MAX_SETS = 64  # input sets per rotation
MAX_COPY_BYTES = 2**30  # memory the copies may take


@functools.lru_cache(maxsize=1)
def last_level_cache_bytes() -> int:
    """The largest CPU cache of this machine ($MIRAGE_JAX_CACHE_BYTES overrides it)."""
    given = os.environ.get("MIRAGE_JAX_CACHE_BYTES")
    if given:
        return int(given)
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (entry / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=FALLBACK_CACHE_BYTES)


def _itemsize(dtype: Any) -> int:
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:  # jax's extended dtypes (PRNG keys)
        return int(getattr(dtype, "itemsize", 0) or 0)


def nbytes(values: Sequence[Any]) -> int:
    """Bytes of arrays or avals (anything with a shape and a dtype)."""
    return sum(math.prod(v.shape) * _itemsize(v.dtype) for v in values)


def exceeds_cache(total_bytes: int) -> bool:
    """Whether a program reading `total_bytes` per call runs with its inputs cache-cold."""
    return total_bytes > last_level_cache_bytes()


def rotation(inputs: Sequence[jax.Array]) -> list[list[jax.Array]]:
    """`inputs` and copies of them, as many as make the sets together hold twice the
    last-level cache (within MAX_SETS and MAX_COPY_BYTES): timed calls that take the sets in
    turn each find their inputs evicted by the calls since."""
    size = max(1, nbytes(inputs))
    want = math.ceil(2 * last_level_cache_bytes() / size)
    sets = max(1, min(want, MAX_SETS, 1 + MAX_COPY_BYTES // size))
    out = [list(inputs)]
    for _ in range(sets - 1):
        out.append([jnp.copy(x) for x in inputs])
    return out

"""Checks of Python-level builder arguments before they cross into C++.

The C++ core enforces every IR rule; these checks only make sure that what reaches it has the
right Python type, so a list where an int belongs becomes a clear TypeError naming the op and
the argument instead of nanobind's generic signature mismatch.
"""

import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

DTYPES = ("float32", "bfloat16", "float16")

_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1


def _where(op: str, arg: str) -> str:
    return f"{op}: argument '{arg}'"


def integer(value: object, op: str, arg: str, *, bits: int = 32) -> int:
    """An int (numpy ints too, bools not) that fits the C++ int of the given width."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{_where(op, arg)} must be an integer, got bool {value!r}")
    try:
        result = operator.index(value)  # type: ignore[arg-type]  # raises for non-integers
    except TypeError:
        raise TypeError(
            f"{_where(op, arg)} must be an integer, got {type(value).__name__} {value!r}"
        ) from None
    limit = _INT64_MAX if bits == 64 else _INT32_MAX
    if not -limit - 1 <= result <= limit:
        raise ValueError(f"{_where(op, arg)} = {result} does not fit a {bits}-bit integer")
    return result


def _sequence(value: object, op: str, arg: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise TypeError(
            f"{_where(op, arg)} must be a tuple or list of integers, "
            f"got {type(value).__name__} {value!r}"
        )
    return list(value)


def shape(value: object, op: str, arg: str = "shape") -> tuple[int, ...]:
    """A tuple of dims. Rank and positivity are the core's rules, checked there."""
    dims = _sequence(value, op, arg)
    return tuple(integer(d, op, f"{arg}[{i}]", bits=64) for i, d in enumerate(dims))


def triple(value: object, op: str, arg: str) -> tuple[int, int, int]:
    """Exactly three ints: a grid, or an imap/omap with one entry per grid axis (x, y, z)."""
    items = _sequence(value, op, arg)
    if len(items) != 3:
        raise ValueError(
            f"{_where(op, arg)} must have 3 entries, one per grid axis (x, y, z), "
            f"got {len(items)}: {tuple(items)!r}"
        )
    x, y, z = (integer(v, op, f"{arg}[{i}]") for i, v in enumerate(items))
    return x, y, z


def dtype(value: object, op: str, arg: str = "dtype") -> str:
    """One of DTYPES; numpy / ml_dtypes dtype objects are accepted by name."""
    if not isinstance(value, str):
        try:
            value = str(np.dtype(value).name)  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(
                f"{_where(op, arg)} must be a dtype name, one of {', '.join(DTYPES)}; "
                f"got {type(value).__name__} {value!r}"
            ) from None
    if value not in DTYPES:
        raise ValueError(
            f"{_where(op, arg)}: unknown dtype {value!r} (expected one of {', '.join(DTYPES)})"
        )
    return value


def scalar(value: object, op: str, arg: str) -> float:
    """A finite real: constants must have an exact value in the finite field as well."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{_where(op, arg)} must be a real number, got {type(value).__name__} {value!r}"
        )
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{_where(op, arg)} must be finite, got {result!r}")
    return result


def choice(value: object, options: Sequence[str], op: str, arg: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{_where(op, arg)} must be a string, got {type(value).__name__}")
    if value not in options:
        raise ValueError(
            f"{_where(op, arg)}: unknown value {value!r} (expected one of {', '.join(options)})"
        )
    return value

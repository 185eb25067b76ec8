"""Importing modules of benchmarks/ (a folder of scripts, not a package) from tests."""

import importlib
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def import_benchmarks(*names: str) -> tuple:
    """The modules benchmarks/<name>.py, imported with benchmarks/ on sys.path only while
    they import (they import each other by plain name)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return tuple(importlib.import_module(name) for name in names)
    finally:
        sys.path.remove(str(BENCHMARKS))

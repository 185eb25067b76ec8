"""Importing modules of benchmarks/ (a folder of scripts, not a package) from tests."""

import importlib
import subprocess
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


def run_benchmark(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """benchmarks/<script> run as a user runs it, in a child process, its output captured."""
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )

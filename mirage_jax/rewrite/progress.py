"""One progress line for optimizing a whole function: regions done of all, searches and
kernels so far, the current stage and the time left of the function's budget.

On a terminal the line is redrawn in place on stderr; elsewhere each stage is an absl log
line. `optimize(verbose=False)` or MIRAGE_JAX_QUIET=1 silences it (warnings still come).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from absl import logging

QUIET_ENV = "MIRAGE_JAX_QUIET"


def quiet() -> bool:
    return os.environ.get(QUIET_ENV, "") not in ("", "0")


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class FunctionProgress:
    """Call `stage(...)` as the work moves on and `close()` once it is done."""

    def __init__(self, name: str, regions: int, budget_s: float, verbose: bool = True):
        self.name, self.regions, self.budget_s = name, regions, budget_s
        self.enabled = verbose and not quiet() and regions > 0
        self.stream = sys.stderr
        self.terminal = _is_terminal(self.stream)
        self.started = time.perf_counter()
        self.done = self.searches = self.kernels = 0
        self._width = 0

    def line(self, what: str) -> str:
        elapsed = time.perf_counter() - self.started
        left = max(0.0, self.budget_s - elapsed)
        return (
            f"mirage_jax.optimize({self.name}): regions {self.done}/{self.regions}, "
            f"{self.searches} searched, {self.kernels} kernels; {what}; "
            f"{elapsed:.0f} s elapsed, at most ~{left:.0f} s left"
        )

    def stage(self, what: str) -> None:
        if not self.enabled:
            return
        text = self.line(what)
        if not self.terminal:
            logging.info("%s", text)
            return
        padding = " " * max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write(f"\r{text}{padding}")
        self.stream.flush()

    def close(self, summary: str) -> None:
        self.stage(summary)
        if self.enabled and self.terminal:
            self.stream.write("\n")
            self.stream.flush()

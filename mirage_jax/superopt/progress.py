"""Progress of a running search: the report the C++ search sends, and how it is shown.

The C++ search reports from the calling thread about every 50 ms; showing every report would
make the display, not the search, the thing that runs. The reporter redraws a terminal line
at most every `redraw_every_s` and logs at most every `log_every_s`, timed by the reports'
own clock so that what is shown does not depend on how fast Python gets the GIL back.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import TextIO

from absl import logging

from mirage_jax import _core

_BAR_WIDTH = 20


@dataclasses.dataclass(frozen=True)
class SearchProgress:
    """One report from a running search."""

    tasks_done: int  # top-level branches of the search tree finished
    tasks_total: int
    states_explored: int
    candidates_accepted: int
    seconds: float  # since the search started
    # The cost model's seconds for the best candidate accepted so far, and for the graph
    # searched (None: none accepted yet, or a graph the model cannot price): what stopping
    # now would return, against the original.
    best_seconds: float | None = None
    original_seconds: float | None = None

    @classmethod
    def from_core(cls, info: _core.SearchProgressInfo) -> SearchProgress:
        def known(seconds: float) -> float | None:
            return seconds if math.isfinite(seconds) else None

        return cls(
            info.tasks_done,
            info.tasks_total,
            info.states_explored,
            info.candidates_accepted,
            info.seconds,
            known(info.best_cost),
            known(info.target_cost),
        )

    def followed_by(self, later: SearchProgress) -> SearchProgress:
        """`later`, a report of the next search of a sequence, counted after this one's
        states, candidates and seconds (its tasks are its own). The best so far is the better
        of both when both searched the same graph (a deepened search's rungs); a search of
        another graph (a part of this one) keeps this one's, since the part's candidates are
        not this graph's."""
        best, original = later.best_seconds, later.original_seconds
        if self.original_seconds is not None and self.original_seconds != original:
            best, original = self.best_seconds, self.original_seconds
        elif self.best_seconds is not None:
            best = self.best_seconds if best is None else min(best, self.best_seconds)
        return dataclasses.replace(
            later,
            states_explored=self.states_explored + later.states_explored,
            candidates_accepted=self.candidates_accepted + later.candidates_accepted,
            seconds=self.seconds + later.seconds,
            best_seconds=best,
            original_seconds=original,
        )

    def summary(self) -> str:
        text = (
            f"{self.tasks_done}/{self.tasks_total} tasks, {self.states_explored:,} states, "
            f"{self.candidates_accepted:,} accepted, {self.seconds:.1f} s"
        )
        if self.best_seconds is not None:
            text += f", best {self.best_seconds * 1e3:.3g} ms by the model"
            if self.original_seconds is not None:
                text += f" (original {self.original_seconds * 1e3:.3g} ms)"
        return text


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class ProgressReporter:
    """Shows reports as one line redrawn in place on a terminal, as absl log lines otherwise.
    Call it with each SearchProgress, then close() once the search has returned."""

    def __init__(
        self,
        stream: TextIO | None,
        *,
        terminal: bool,
        redraw_every_s: float = 0.1,
        log_every_s: float = 5.0,
    ):
        self._stream = stream
        # A terminal line needs a stream to draw on; without one, reports are logged.
        self._terminal = terminal and stream is not None
        self._interval = redraw_every_s if self._terminal else log_every_s
        self._latest: SearchProgress | None = None
        self._shown: SearchProgress | None = None
        self._line_width = 0

    @classmethod
    def for_stderr(cls) -> ProgressReporter:
        return cls(sys.stderr, terminal=_is_terminal(sys.stderr))

    def __call__(self, report: SearchProgress) -> None:
        self._latest = report
        if self._shown is None or report.seconds - self._shown.seconds >= self._interval:
            self._show(report)

    def close(self) -> None:
        """Shows the last report if it was throttled away, and ends the terminal line."""
        if self._latest is not None and self._latest is not self._shown:
            self._show(self._latest)
        if self._stream is not None and self._terminal and self._shown is not None:
            self._stream.write("\n")
            self._stream.flush()

    def _show(self, report: SearchProgress) -> None:
        self._shown = report
        if self._stream is None or not self._terminal:
            logging.info("search: %s", report.summary())
            return
        total = max(report.tasks_total, 1)
        filled = _BAR_WIDTH * report.tasks_done // total
        line = f"search [{'#' * filled}{'-' * (_BAR_WIDTH - filled)}] {report.summary()}"
        # Blanks over the tail of a longer previous line: "\r" only moves the cursor.
        padding = " " * max(0, self._line_width - len(line))
        self._line_width = len(line)
        self._stream.write(f"\r{line}{padding}")
        self._stream.flush()

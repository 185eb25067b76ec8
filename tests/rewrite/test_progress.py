"""The one progress line of optimizing a function (mirage_jax/rewrite/progress.py): redrawn
in place on a terminal, absl log lines elsewhere, silent with verbose=False or
MIRAGE_JAX_QUIET=1."""

import io

from absl import logging

from mirage_jax.rewrite.progress import FunctionProgress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def progress(monkeypatch, stream, verbose=True):
    p = FunctionProgress("decoder", 3, 20.0, verbose=verbose)
    p.stream, p.terminal = stream, stream.isatty()
    return p


def test_on_a_terminal_one_line_is_redrawn_in_place(monkeypatch):
    monkeypatch.delenv("MIRAGE_JAX_QUIET", raising=False)
    out = Terminal()
    p = progress(monkeypatch, out)
    p.stage("estimating region 1")
    p.done, p.searches = 1, 1
    p.stage("superoptimizing a region (8 s of search)")
    p.close("1 kernel regions, kept")
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    last = text.split("\r")[-1]
    assert "mirage_jax.optimize(decoder): regions 1/3, 1 searched, 0 kernels" in last
    assert "1 kernel regions, kept" in last and "s left" in last
    # a shorter line blanks the tail of the longer one before it
    before, after = text.split("\r")[2], text.split("\r")[3].rstrip("\n")
    assert len(after) >= len(before) and after.endswith(" ")


def test_elsewhere_each_stage_is_a_log_line(monkeypatch):
    monkeypatch.delenv("MIRAGE_JAX_QUIET", raising=False)
    logged = []
    monkeypatch.setattr(logging, "info", lambda fmt, *args: logged.append(fmt % args))
    out = io.StringIO()  # not a terminal
    p = progress(monkeypatch, out)
    p.stage("estimating region 1")
    p.close("no kernel kept: runs as jax.jit")
    assert out.getvalue() == "" and len(logged) == 2
    assert "regions 0/3" in logged[0] and "no kernel kept" in logged[1]


def test_verbose_false_and_quiet_silence_it(monkeypatch):
    logged = []
    monkeypatch.setattr(logging, "info", lambda fmt, *args: logged.append(fmt % args))
    for verbose, quiet in ((False, None), (True, "1")):
        if quiet is None:
            monkeypatch.delenv("MIRAGE_JAX_QUIET", raising=False)
        else:
            monkeypatch.setenv("MIRAGE_JAX_QUIET", quiet)
        out = Terminal()
        p = progress(monkeypatch, out, verbose=verbose)
        p.stage("estimating region 1")
        p.close("done")
        assert out.getvalue() == "" and logged == []

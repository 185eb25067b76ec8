"""Shared fixtures: a seeded generator, the two interpreter precisions with the tolerance
each one can be held to, and stored verdicts turned off; the CPU cost model on its presets."""

import os

import numpy as np
import pytest

# The cost model ranks with its presets (this machine's cores and cache only), not with this
# machine's measured calibration: the candidates a test's search keeps must not depend on
# the machine's speed or load. tests/superopt/test_calibration.py turns calibration on. Set
# here, before any test imports mirage_jax, so subprocesses inherit it too.
os.environ.setdefault("MIRAGE_JAX_CALIBRATION", "0")

# float64 results agree with numpy up to summation order; float32 up to a few ulps of the
# accumulations these small tests do.
PRECISIONS = {"float64": 1e-12, "float32": 2e-5}


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(params=sorted(PRECISIONS))
def precision(request):
    """(dtype name, relative tolerance) for KernelGraph.evaluate."""
    return request.param, PRECISIONS[request.param]


@pytest.fixture(autouse=True)
def _fresh_region_memo():
    """Each test decides its regions afresh: the optimizer's per-process memo of identical
    regions would otherwise carry one test's forced timings into the next."""
    from mirage_jax.rewrite import region

    region.forget()
    yield
    region.forget()


@pytest.fixture(autouse=True)
def no_stored_verdicts(monkeypatch):
    """Tests share one cache root (kernels compile once per run) and many replace the timer:
    a verdict stored by one test would decide for the next. The verdict tests turn them on."""
    monkeypatch.setenv("MIRAGE_JAX_VERDICTS", "0")


@pytest.fixture(autouse=True)
def one_precompiled_header(monkeypatch, tmp_path_factory):
    """The CPU kernels' precompiled header under one directory of the run, whatever cache
    root a test makes fresh: it is the machine's, one for all of a user's processes, and one
    per fresh cache root cost the suite 1.2 s and 50 MB each, about 200 times.
    tests/runtime/test_precompiled_header.py puts it back where the package keeps it."""
    from mirage_jax.runtime import precompiled_header

    shared = tmp_path_factory.getbasetemp() / "machine_cache"
    monkeypatch.setattr(precompiled_header, "root", lambda: shared)

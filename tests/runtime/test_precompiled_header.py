"""The CPU kernels' precompiled header (mirage_jax/runtime/precompiled_header.py): g++ takes
it for a generated kernel's compile, a kernel built with it computes what the reference
interpreter does, a header that breaks a compile is dropped and the kernel built without it,
and `cache clear` removes it."""

import subprocess
import warnings

import numpy as np
import pytest
from cache_test_support import kernels_of
from kernel_test_support import assert_close, random_inputs, storage_rtol

import mirage_jax as mj
from mirage_jax import _core
from mirage_jax.cache import store
from mirage_jax.cli.main import main
from mirage_jax.ir.paper_graphs import PROGRAMS
from mirage_jax.runtime import kernel_cache, precompiled_header, toolchain


def fused(name):
    """The paper's μGraph of `name` at its small shapes: one generated kernel or more."""
    program = PROGRAMS[name]
    return program.build(**program.small)[1]


def test_the_kernels_include_the_precompiled_text_before_their_own_code():
    """The header is what every generated kernel includes first: else g++ would still parse
    the headers the header leaves out."""
    (_, source), *_ = kernels_of(fused("rmsnorm_linear"))
    includes = _core.cpu_kernel_includes()
    assert "#include <immintrin.h>" in includes
    assert includes in source
    assert source.index(includes) < source.index("namespace mj_cpu")


def test_g_plus_plus_reads_the_precompiled_header_for_a_generated_kernel(tmp_path, monkeypatch):
    """-H lists the headers a compile reads, with '!' before a precompiled one it used: with
    the kernels' flags and the header built by header(), it is the .gch, not the text."""
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "machine"))
    monkeypatch.setattr(precompiled_header, "root", store.machine_root)
    header = precompiled_header.header()
    assert (
        header is not None and header.parent.parent == tmp_path / "machine" / "precompiled_headers"
    )
    (_, source), *_ = kernels_of(fused("rmsnorm_linear"))
    unit = tmp_path / "kernel.cc"
    unit.write_text(source)
    done = subprocess.run(
        [toolchain.find_gxx(), *toolchain.GXX_FLAGS, "-H", "-include", str(header), str(unit)]
        + ["-o", str(tmp_path / "kernel.so")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"! {header}.gch" in done.stderr, done.stderr[:2000]
    # The kernel's own #includes open the top headers only to find their guards defined:
    # what those include is not read as text again.
    assert "bits/stl_algo.h" not in done.stderr, done.stderr[:2000]
    assert "avx512fintrin.h" not in done.stderr, done.stderr[:2000]


@pytest.fixture
def includes(monkeypatch):
    """The header each g++ compile of a kernel library is given (None: none), in order."""
    real, given = toolchain.compile_cpu_library, []

    def recording(source, library, include=None):
        given.append(include)
        real(source, library, include)

    monkeypatch.setattr(toolchain, "compile_cpu_library", recording)
    return given


def test_a_kernel_built_with_the_header_runs_and_matches_the_interpreter(
    tmp_path, monkeypatch, includes
):
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "cache"))
    graph = fused("rmsnorm_linear")
    x, *rest = random_inputs(graph)
    # A row of zeros (the norm's 0 / sqrt(eps)) and one a thousand times larger.
    x = x.at[0].set(0.0).at[1].multiply(1e3)
    args = [x, *rest]
    got = np.asarray(mj.compile(graph)(*args)[0])
    assert np.isfinite(got).all() and not got[0].any()
    header = precompiled_header.header()
    assert header is not None and includes and set(includes) == {header}
    want = graph.evaluate([np.asarray(a) for a in args])[0]
    assert_close(got, want, storage_rtol("float32") * 10, "rmsnorm_linear with the header")


def test_a_header_that_breaks_the_compile_is_dropped_and_the_kernel_built_without(
    tmp_path, monkeypatch
):
    """A .gch g++ accepts but that breaks the kernel stands for a damaged one: the kernel is
    compiled again without it, with one warning, and this process uses no header after."""
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "cache"))
    broken = tmp_path / "machine" / "entry" / precompiled_header.HEADER
    broken.parent.mkdir(parents=True)
    broken.write_text('#error "a damaged precompiled header"\n')
    monkeypatch.setattr(precompiled_header, "_built", {(tmp_path, "k"): broken})
    monkeypatch.setattr(
        precompiled_header, "header", lambda: precompiled_header._built[tmp_path, "k"]
    )
    graph = fused("rmsnorm_linear")
    (symbol, source), *_ = kernels_of(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fallback logs; it does not warn the user's code
        library = kernel_cache.library_for(source, symbol=symbol)
    assert library.is_file()
    assert not broken.parent.exists()
    assert precompiled_header._built == {(tmp_path, "k"): None}
    args = random_inputs(graph)
    got = np.asarray(mj.compile(graph)(*args)[0])
    want = graph.evaluate([np.asarray(a) for a in args])[0]
    assert_close(got, want, storage_rtol("float32") * 10, "rmsnorm_linear without the header")


def test_a_kernel_error_is_the_compile_without_the_header(tmp_path, monkeypatch, includes):
    """A kernel that does not compile fails with its own diagnostics from a compile without
    the header, and the (sound) header is kept."""
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path / "cache"))
    header = precompiled_header.header()
    assert header is not None
    unit = tmp_path / "bad.cc"
    unit.write_text("int f() { return undeclared_name; }\n")
    with pytest.raises(toolchain.KernelCompileError, match="undeclared_name"):
        precompiled_header.compile_cpu_library(unit, tmp_path / "bad.so")
    assert includes == [header, None]
    assert header.with_name(f"{header.name}.gch").is_file()


def test_cache_clear_removes_the_precompiled_header(tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(cache))
    monkeypatch.setattr(precompiled_header, "root", store.machine_root)
    assert precompiled_header.header() is not None
    assert (cache / "precompiled_headers").is_dir()
    assert main(["cache", "clear", "--yes"]) == 0, capsys.readouterr()
    assert not (cache / "precompiled_headers").exists()

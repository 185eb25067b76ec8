"""Generated CUDA kernels (cc/codegen/cuda) compile with this machine's nvcc for sm_80 and
sm_90a: every hand-written paper μGraph (small and paper shapes, float32 and bfloat16) and
every fused result of the searches in test_search_results_run. Errors are clear: a missing
nvcc, a bad architecture, a broken source, shared memory over the target's limit.

Running the kernels needs a GPU: tests/gpu/ compares them with the interpreter and with XLA.
nvcc is slow: each translation unit's host side (the XLA FFI headers) takes about 15 s, and
each kernel's device passes about a second per architecture. So kernels are batched into two
units per test, compiled side by side (nvcc -c, both -gencode in one call).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import re
import subprocess
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from kernel_test_support import (  # noqa: F401 (session_kernel_cache is an autouse fixture)
    FRAGMENT_SIZED,
    assert_close,
    kernel_rtol,
    projection_and_rope_product,
    random_inputs,
    session_kernel_cache,
    storage_rtol,
)
from search_test_support import SEARCHES, fused_candidates

import mirage_jax as mj
from mirage_jax import _core
from mirage_jax.ir.paper_graphs import PROGRAMS
from mirage_jax.runtime import backends, kernel_cache, toolchain
from mirage_jax.runtime import compile as _compile
from mirage_jax.runtime.toolchain import KernelCompileError

ARCHS = ("80", "90a")


def cuda_kernels(graph: mj.KernelGraph) -> dict[int, tuple[str, str]]:
    """op index -> (handler symbol, source) of each customized op, as mj.compile generates
    them under the current settings (architectures, matmul precision)."""
    return _compile._kernels(graph, backends.CUDA, backends.CUDA.options())


@pytest.fixture(scope="module")
def nvcc():
    try:
        return toolchain.find_nvcc()
    except KernelCompileError as e:
        pytest.skip(f"CUDA compile checks need nvcc: {e}")


@pytest.fixture(autouse=True)
def archs(monkeypatch):
    monkeypatch.setenv(toolchain.ARCH_ENV, ",".join(ARCHS))


def kernels_of(graph: mj.KernelGraph) -> dict[str, str]:
    """symbol -> CUDA source of every customized op, planned for ARCHS."""
    limit = toolchain.shared_memory_limit(ARCHS)
    out = {}
    for op in graph.ops:
        if op.kind == "customized":
            bg = op.block_graph._core
            symbol = _core.cuda_kernel_symbol(bg)
            out[symbol] = _core.generate_cuda_kernel(bg, symbol, limit)
    return out


def two_units(kernels: dict[str, str], count: int = 2) -> list[str]:
    """The kernels as `count` translation units of about equal length (generated units may be
    concatenated), one per parallel nvcc job: a unit's host side is compiled once, and 20
    kernels' device passes for two architectures stay far from nvcc's timeout (600 s)."""
    units = [[] for _ in range(count)]
    sizes = [0] * count
    for source in sorted(kernels.values(), key=len, reverse=True):
        i = sizes.index(min(sizes))
        units[i].append(source)
        sizes[i] += len(source)
    return ["\n".join(u) for u in units if u]


def test_every_paper_graph_compiles_for_sm80_and_sm90a(nvcc):
    kernels = {}
    for name, program in sorted(PROGRAMS.items()):
        for shapes in (program.small, {}):  # {}: the paper's shapes
            for dtype in ("float32", "bfloat16"):
                _, fused = program.build(**shapes, dtype=dtype)
                found = kernels_of(fused)
                assert found, f"{name}: the fused graph has no customized op"
                kernels.update(found)
    assert len(kernels) >= 4 * len(PROGRAMS)
    toolchain.check_cuda_compiles(two_units(kernels), ARCHS, jobs=2)


@pytest.fixture(scope="module")
def search_results() -> dict[str, list[mj.KernelGraph]]:
    """The fused candidates test_search_results_run checks, per search (about 20 s)."""
    found = {}
    for name, (make_reference, config) in sorted(SEARCHES.items()):
        result = mj.search(make_reference(), config=config, progress=False)
        found[name] = fused_candidates(result)
        assert found[name], f"{name}: the search found no fused candidate ({result.reason!r})"
    return found


def test_every_search_result_compiles_for_sm80_and_sm90a(nvcc, search_results):
    kernels = {}
    for fused in search_results.values():
        for graph in fused:
            kernels.update(kernels_of(graph))
    toolchain.check_cuda_compiles(two_units(kernels), ARCHS, jobs=2)


def test_generate_code_names_each_kernel_once(monkeypatch):
    # Unsplit plans: a split-K kernel has two __global__ functions (partial and finish).
    monkeypatch.setenv(toolchain.SMS_ENV, "1")
    _, fused = PROGRAMS["gqa_decode"].build(**PROGRAMS["gqa_decode"].small)
    source = mj.generate_code(fused, backend="cuda")
    symbols = [symbol for symbol, _ in cuda_kernels(fused).values()]
    assert len(symbols) == 2
    for symbol in symbols:
        assert symbol.startswith("mj_cuda_")
        assert source.count(f"XLA_FFI_DEFINE_HANDLER_SYMBOL({symbol},") == 1
    assert source.count("__global__") == 2


def test_a_broken_source_is_a_compile_error_with_diagnostics(nvcc):
    with pytest.raises(KernelCompileError, match=r"(?s)nvcc failed.*unit0\.cu.*error"):
        toolchain.check_cuda_compiles(["this is not CUDA;\n"], ARCHS)


def test_a_bad_architecture_is_a_clear_error(nvcc, monkeypatch):
    _, fused = PROGRAMS["ntrans"].build(**PROGRAMS["ntrans"].small)
    monkeypatch.setenv(toolchain.ARCH_ENV, "80,sm90x")
    with pytest.raises(KernelCompileError, match=r"MIRAGE_JAX_CUDA_ARCH='80,sm90x'.*bad: sm90x"):
        mj.generate_code(fused, backend="cuda")
    # Well-formed but unknown to nvcc: its own diagnostic names the architecture.
    source = next(iter(kernels_of(fused).values()))
    with pytest.raises(KernelCompileError, match=r"(?s)nvcc failed.*compute_12"):
        toolchain.check_cuda_compiles([source], ("12",))


def test_architectures_before_sm80_are_refused_by_name(monkeypatch):
    monkeypatch.setenv(toolchain.ARCH_ENV, "75,80")
    _, fused = PROGRAMS["ntrans"].build(**PROGRAMS["ntrans"].small)
    with pytest.raises(KernelCompileError, match=r"need sm_80 or later.*not sm_75"):
        mj.generate_code(fused, backend="cuda")


def test_the_library_embeds_ptx_of_its_oldest_architecture():
    """SASS for each architecture, and PTX that a newer GPU family's driver compiles: the
    oldest target's, without an a/f suffix (arch-specific PTX runs nowhere else)."""
    flags = " ".join(toolchain.gencode_flags(("80", "90a")))
    assert "arch=compute_80,code=sm_80" in flags and "arch=compute_90a,code=sm_90a" in flags
    assert "arch=compute_80,code=compute_80" in flags
    assert "code=compute_90" in " ".join(toolchain.gencode_flags(("90a",)))
    assert "code=compute_90a" not in " ".join(toolchain.gencode_flags(("90a",)))


def test_shared_memory_is_planned_for_the_visible_gpu_too(monkeypatch):
    """A GPU whose per-block limit is below the architectures' (sm_86/89/120: 99 KiB) bounds
    the plan: a kernel that fits sm_80 and sm_90a but not it is refused at generation."""
    graph = overflowing_graph(192)  # 147456 bytes
    monkeypatch.setenv(toolchain.ARCH_ENV, "80,90a")
    monkeypatch.setattr(toolchain, "_driver_cache", (13000, (), ()))
    assert "__global__" in mj.generate_code(graph, backend="cuda")
    monkeypatch.setattr(toolchain, "_driver_cache", (13000, (227 * 1024, 101376), (132, 84)))
    with pytest.raises(ValueError, match=r"limit of 101376 bytes"):
        mj.generate_code(graph, backend="cuda")


def test_the_cache_key_names_the_toolkit_and_its_minimum_driver(monkeypatch):
    monkeypatch.setattr(toolchain, "_toolkit", "13.0.88")
    key = kernel_cache.library_key("source", backends.CUDA)
    monkeypatch.setattr(toolchain, "_toolkit", "13.1.20")
    assert kernel_cache.library_key("source", backends.CUDA) != key
    assert toolchain.minimum_driver("13.0.88") == 13000
    assert toolchain.minimum_driver("12.8.61") == 12000


def test_tf32_follows_jax_matmul_precision():
    import jax

    _, fused = PROGRAMS["rmsnorm_linear"].build(**FRAGMENT_SIZED["rmsnorm_linear"])
    assert toolchain.tf32_allowed()  # jax's default: XLA uses TF32 itself
    ((symbol, source),) = cuda_kernels(fused).values()
    assert symbol.endswith("_tf32") and "mj_cuda::mma_m16n8k8_tf32(" in source
    with jax.default_matmul_precision("highest"):
        assert not toolchain.tf32_allowed()
        ((full, full_source),) = cuda_kernels(fused).values()
    assert full != symbol and "mj_cuda::mma_m16n8k8_tf32(" not in full_source
    assert "fmaf(" in full_source


def test_a_kernel_that_cannot_run_here_is_refused_at_load(nvcc, tmp_path, monkeypatch):
    """The library's exported check runs before the handler is registered: on a machine
    without a CUDA driver it names that (on a GPU machine: a missing image, too little shared
    memory, an old driver), and the region would fall back to XLA."""
    from mirage_jax.runtime import ffi_targets
    from mirage_jax.runtime.library_probe import KernelLoadError

    _, fused = PROGRAMS["ntrans"].build(**PROGRAMS["ntrans"].small)
    op = next(o for o in fused.ops if o.kind == "customized")
    symbol = _core.cuda_kernel_symbol(op.block_graph._core)
    (tmp_path / "k.cu").write_text(
        _core.generate_cuda_kernel(op.block_graph._core, symbol, 163 * 1024)
    )
    toolchain.compile_cuda_library(tmp_path / "k.cu", tmp_path / "k.so", ("80",))

    class Device:
        id = 0

        def __str__(self):
            return "cuda:0"

    if toolchain.driver_cuda_version() is not None:
        pytest.skip("this machine has a CUDA driver: tests/gpu covers the check on a GPU")
    with pytest.raises(
        KernelLoadError,
        match=rf"{symbol} cannot run on cuda:0: no CUDA "
        r"driver found",
    ):
        ffi_targets.check_cuda_kernel(symbol, tmp_path / "k.so", devices=[Device()])


def test_a_missing_nvcc_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    monkeypatch.setattr(toolchain, "FALLBACK_ROOTS", ())
    monkeypatch.delenv("CUDA_HOME", raising=False)
    _, fused = PROGRAMS["ntrans"].build(**PROGRAMS["ntrans"].small)
    with pytest.raises(KernelCompileError, match="nvcc was not found on PATH"):
        mj.compile(fused, backend="cuda")


def overflowing_graph(rows: int) -> mj.KernelGraph:
    """One block computing a [rows, rows] f32 matmul tile: rows * rows * 4 bytes of shared
    memory that no input demotion can save."""
    g = mj.KernelGraph()
    a, b = g.new_input((rows, 8)), g.new_input((8, rows))
    bg = mj.BlockGraph(grid=(1, 1, 1), forloop_range=1)
    ta, tb = bg.new_input(a, (-1, -1, -1), -1), bg.new_input(b, (-1, -1, -1), -1)
    bg.new_output(bg.matmul(ta, tb), (-1, -1, -1))
    (out,) = g.customized([a, b], bg)
    g.mark_output(out)
    return g


def test_shared_memory_over_the_target_limit_is_refused(monkeypatch):
    monkeypatch.setenv(toolchain.ARCH_ENV, "80")
    with pytest.raises(ValueError, match=r"needs 262144 bytes .* limit of 166912 bytes"):
        mj.generate_code(overflowing_graph(256), backend="cuda")


def test_the_limit_is_the_smallest_of_the_target_architectures(monkeypatch):
    graph = overflowing_graph(192)  # 147456 bytes: fits sm_80 and sm_90a, not sm_86
    monkeypatch.setenv(toolchain.ARCH_ENV, "80,90a")
    assert "__global__" in mj.generate_code(graph, backend="cuda")
    monkeypatch.setenv(toolchain.ARCH_ENV, "80,86")
    with pytest.raises(ValueError, match=r"limit of 101376 bytes"):
        mj.generate_code(graph, backend="cuda")


def test_superoptimize_for_cuda_needs_a_visible_gpu():
    import jax

    try:
        jax.devices("gpu")
        pytest.skip("a GPU is visible; tests/gpu covers superoptimize on it")
    except RuntimeError:
        pass
    ref, _ = PROGRAMS["ntrans"].build(**PROGRAMS["ntrans"].small)
    with pytest.raises(RuntimeError, match="backend 'cuda' times candidates on a GPU"):
        mj.superoptimize(ref, backend="cuda", progress=False)


# ------------------------------------------------------------------ semantics, emulated
# Without a GPU the kernels still run: tests/runtime/cuda_host_emulation.h maps threads, barriers,
# shuffles and the warp's mma.sync onto std::thread, and g++ builds each generated kernel into
# a host library. That checks what the generator computes against the interpreter (bf16
# kernels through their tensor-core fragments, f32 ones through FMA); the hardware
# instructions themselves (mma.sync, cp.async) are left to tests/gpu.

EMULATION_HEADER = Path(__file__).parent / "cuda_host_emulation.h"


def cuda_include_dir() -> Path | None:
    """The CUDA toolkit's include directory (for cuda_bf16.h's host conversions)."""
    roots = [Path(r) for r in (os.environ.get("CUDA_HOME"), *toolchain.FALLBACK_ROOTS) if r]
    with contextlib.suppress(KernelCompileError):
        roots.insert(0, Path(toolchain.find_nvcc()).resolve().parent.parent)
    for root in roots:
        if (root / "include" / "cuda_bf16.h").is_file():
            return root / "include"
    return None


@pytest.fixture
def cuda_include():
    found = cuda_include_dir()
    if found is None:
        pytest.skip(
            "emulating CUDA kernels on the host needs the CUDA toolkit's headers "
            "(cuda_bf16.h); none found next to nvcc, in $CUDA_HOME or /usr/local/cuda"
        )
    return found


def emulation_unit(source: str) -> str:
    """A host translation unit from a generated CUDA unit: the device helpers, each kernel
    namespace up to its FFI handler, the shared memory each kernel declares, and per kernel
    `extern "C" void run_<symbol>(void** io)` (the whole grid) and
    `run_block_<symbol>(void** io, unsigned x, unsigned y, unsigned z)` (one block)."""
    helpers = source[
        source.index('#include "xla/ffi/api/ffi.h"') + 1 : source.index("// ---- host side:")
    ]
    helpers = helpers[helpers.index("\n") :]
    parts = [f'#include "{EMULATION_HEADER}"', helpers, "}  // namespace mj_cuda"]
    for match in re.finditer(r"namespace (mj_cuda_\w+)_kernel \{", source):
        symbol = match.group(1)
        rest = source[match.start() :]
        body = rest[: rest.index("  constexpr int kSmemBytes")]
        gx, gy, gz = re.search(r"dim3\((\d+), (\d+), (\d+)[^)]*\), dim3\(kThreads\)", rest).groups()
        threads = int(re.search(r"constexpr int kThreads = (\d+);", rest).group(1))
        smem = int(re.search(r"constexpr int kSmemBytes = (\d+);", rest).group(1))
        split = re.search(r"constexpr int kSplitK = (\d+);", rest[: rest.index("prepare(")])
        size = max(smem, 16)
        pointers = len(re.findall(r"[*] (?:in|out)[0-9]+;", body))
        launch = (
            f"  {symbol}_kernel::Io args;\n"
            f"  std::memcpy(&args, io, sizeof(void*) * {pointers});\n"
            f"  mj_emulation::smem_begin = {symbol}_kernel::smem;\n"
            f"  mj_emulation::smem_end = {symbol}_kernel::smem + {size};\n"
        )
        if split:
            # split-K: the partial kernel over gz * split along z, then the finishing one
            k = int(split.group(1))
            floats = (
                int(re.search(r"constexpr int64_t kWorkspaceBytes = (\d+);", rest).group(1)) // 4
            )
            launch += f"  std::vector<float> ws({floats});\n  args.ws = ws.data();\n"
            grids = [
                (f"{{{gx}, {gy}, {int(gz) * k}}}", "kernel_partial"),
                (f"{{{gx}, {gy}, {gz}}}", "kernel_finish"),
            ]
        else:
            grids = [(f"{{{gx}, {gy}, {gz}}}", "kernel")]
        whole = "".join(
            f"  mj_emulation::launch({grid}, {threads}, "
            f"[&] {{ {symbol}_kernel::{name}(args); }});\n"
            for grid, name in grids
        )
        one = "".join(
            f"  mj_emulation::launch({grid}, {threads}, "
            f"[&] {{ {symbol}_kernel::{name}(args); }}, &only);\n"
            for grid, name in grids
        )
        parts += [
            body + "}",
            f"namespace {symbol}_kernel {{ __attribute__((aligned(16))) unsigned char "
            f"smem[{size}]; }}",
            f'extern "C" void run_{symbol}(void** io) {{\n{launch}{whole}}}',
            f'extern "C" void run_block_{symbol}(void** io, unsigned x, unsigned y, '
            f"unsigned z) {{\n{launch}"
            f"  const mj_emulation::Index3 only{{x, y, z}};\n{one}}}",
        ]
    parts.append(
        'extern "C" const char* emulation_failure() { return mj_emulation::failure.load(); }'
    )
    return "\n".join(parts)


def build_emulation(source: str, directory: Path) -> ctypes.CDLL:
    unit = directory / "emulated.cc"
    unit.write_text(emulation_unit(source))
    library = directory / "emulated.so"
    done = subprocess.run(
        [
            "g++",
            "-std=c++20",
            "-O1",
            "-shared",
            "-fPIC",
            "-pthread",
            "-w",
            "-isystem",
            str(cuda_include_dir()),
            str(unit),
            "-o",
            str(library),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"g++ failed on the emulated kernels:\n{done.stderr[-3000:]}"
    return ctypes.CDLL(str(library))


def single_kernel(op) -> mj.KernelGraph:
    """A graph of just one customized op, its inputs and outputs."""
    g = mj.KernelGraph()
    inputs = [g.new_input(t.shape, t.dtype) for t in op.inputs]
    for out in g.customized(inputs, op.block_graph):
        g.mark_output(out)
    return g


def emulation_failure(library: ctypes.CDLL) -> str | None:
    """The first warp instruction an emulated kernel used against its contract, if any."""
    library.emulation_failure.restype = ctypes.c_char_p
    failure = library.emulation_failure()
    return failure.decode() if failure else None


def run_kernel(library: ctypes.CDLL, op, args: list) -> list:
    """Runs customized op `op` emulated on numpy arrays; returns its outputs."""
    args = [np.ascontiguousarray(a) for a in args]
    outs = [np.zeros(t.shape, dtype=jnp.dtype(t.dtype)) for t in op.outputs]
    pointers = (ctypes.c_void_p * (len(args) + len(outs)))(
        *[a.ctypes.data for a in args], *[o.ctypes.data for o in outs]
    )
    getattr(library, "run_" + _core.cuda_kernel_symbol(op.block_graph._core))(pointers)
    failure = emulation_failure(library)
    assert failure is None, f"emulated kernel broke an instruction's contract: {failure}"
    return outs


def run_graph(library: ctypes.CDLL, graph: mj.KernelGraph, inputs: list) -> list:
    """A graph whose ops are all customized, kernel after kernel, each emulated."""
    values = {t.id: x for t, x in zip(graph.inputs, inputs)}
    for op in graph.ops:
        if op.kind == "customized":
            outs = run_kernel(library, op, [values[t.id] for t in op.inputs])
            values.update((t.id, out) for t, out in zip(op.outputs, outs))
    return [values[t.id] for t in graph.outputs]


def check_emulated(
    graphs: list[mj.KernelGraph],
    tmp_path: Path,
    what: str,
    smem_limit=None,
    tf32: bool = False,
    sm_count: int = 132,
) -> dict[str, str]:
    """Runs every customized op of `graphs` emulated on random inputs and compares with the
    interpreter (float64): a graph of customized ops only end to end (so a combine kernel
    sees the sums its partner produced), any other graph one kernel at a time. Kernels are
    planned for `smem_limit(block graph)` bytes (default: ARCHS' limit), with TF32 allowed
    for float32 matmuls when `tf32`, for a GPU of `sm_count` SMs (small grids split their
    loops over it: split-K). Returns the kernels' sources by symbol."""
    default = toolchain.shared_memory_limit(ARCHS)
    runs = []  # (graph, label): what to run end to end
    for graph in graphs:
        ops = [op for op in graph.ops if op.kind not in ("input", "output")]
        if all(op.kind == "customized" for op in ops):
            runs.append((graph, graph.label))
        else:
            runs += [
                (single_kernel(op), f"{graph.label} op {op.index}")
                for op in ops
                if op.kind == "customized"
            ]
    kernels = {}
    for graph, _ in runs:
        for op in graph.ops:
            if op.kind == "customized":
                symbol = _core.cuda_kernel_symbol(op.block_graph._core)
                if symbol not in kernels:
                    bg = op.block_graph._core
                    limit = smem_limit(bg) if smem_limit else default
                    kernels[symbol] = _core.generate_cuda_kernel(bg, symbol, limit, tf32, sm_count)
    library = build_emulation("\n".join(kernels.values()), tmp_path)
    for graph, label in runs:
        inputs = [np.asarray(x) for x in random_inputs(graph, seed=3)]
        got = run_graph(library, graph, inputs)
        want = graph.evaluate(inputs)
        # Normwise, as in test_search_results_run: the kernels sum in another order than the
        # interpreter (threads, then a warp's shuffle tree), so elements that cancel to near
        # zero carry their operands' rounding, not their own.
        for i, (g, w, t) in enumerate(zip(got, want, graph.outputs)):
            assert_close(g, w, kernel_rtol(t.dtype, tf32), f"{what}: {label} output {i}", floor=1.0)
    return kernels


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_paper_kernels_compute_what_the_interpreter_does_emulated(cuda_include, dtype, tmp_path):
    graphs = [program.build(**program.small, dtype=dtype)[1] for program in PROGRAMS.values()]
    assert len(check_emulated(graphs, tmp_path, f"paper graphs {dtype}")) >= len(PROGRAMS)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_fragment_sized_kernels_compute_what_the_interpreter_does_emulated(
    cuda_include, dtype, tmp_path
):
    graphs = [
        PROGRAMS[name].build(**shapes, dtype=dtype)[1] for name, shapes in FRAGMENT_SIZED.items()
    ]
    kernels = check_emulated(graphs, tmp_path, f"fragment-sized {dtype}")
    assert len(kernels) >= len(FRAGMENT_SIZED)
    threads = {int(re.search(r"__launch_bounds__\((\d+)\)", s).group(1)) for s in kernels.values()}
    assert threads == {128, 256}
    # Their grids of 2 to 8 blocks split their loops for a 132-SM GPU (split-K).
    assert sum("kernel_partial(" in s for s in kernels.values()) >= 2


def test_unsplit_kernels_compute_what_the_interpreter_does_emulated(cuda_include, tmp_path):
    """The same kernels planned for a GPU their grids fill: one kernel, the whole loop (the
    float32 ones run unsplit in the single-buffered and global-memory tests)."""
    graphs = [
        PROGRAMS[name].build(**shapes, dtype="bfloat16")[1]
        for name, shapes in FRAGMENT_SIZED.items()
    ]
    kernels = check_emulated(graphs, tmp_path, "unsplit bfloat16", sm_count=1)
    assert not any("kernel_partial(" in s for s in kernels.values())


def every_op_graph(dtype: str) -> mj.KernelGraph:
    """One kernel using every elementwise op but erf and select (with a broadcast operand),
    reduce sum/mean/max along first, middle and last dims, rms_norm and concat along the first
    and last dims."""
    g = mj.KernelGraph()
    X, Y = g.new_input((4, 8, 6), dtype), g.new_input((6,), dtype)
    bg = mj.BlockGraph(grid=(2, 1, 1), forloop_range=1)
    x, y = bg.new_input(X, (0, -1, -1), -1), bg.new_input(Y, (-1, -1, -1), -1)
    one = bg.add_scalar(bg.square(x), 1.0)
    chain = bg.div(bg.sigmoid(bg.add(bg.gelu(x), y)), bg.sqrt(one))
    chain = bg.sub(bg.mul(chain, bg.rsqrt(one)), bg.recip(one))
    chain = bg.add(chain, bg.relu(bg.neg(bg.silu(bg.exp(bg.mul_scalar(x, 0.5))))))
    chain = bg.add(chain, bg.gelu_erf(bg.erfc(x)))
    outs = [
        chain,
        bg.reduce(x, 0, "mean"),
        bg.reduce(x, 1, "sum"),
        bg.reduce(x, -1, "max"),
        bg.concat(bg.rms_norm(x, 1e-5), x, -1),
        bg.concat(x, chain, 0),
    ]
    for t in outs:
        bg.new_output(t, (0, -1, -1))
    for t in g.customized([X, Y], bg):
        g.mark_output(t)
    return g


def every_accumulator_graph(dtype: str) -> mj.KernelGraph:
    """Every accumulator over a 3-iteration loop, and a batched matmul whose rank-2 B
    broadcasts over A's batch."""
    g = mj.KernelGraph()
    A, B = g.new_input((3, 4, 12), dtype), g.new_input((12, 5), dtype)
    bg = mj.BlockGraph(grid=(1, 1, 1), forloop_range=3)
    a, b = bg.new_input(A, (-1, -1, -1), 2), bg.new_input(B, (-1, -1, -1), 0)
    outs = [
        bg.accum_sum(bg.matmul(a, b)),
        bg.accum_sum_last(a),
        bg.accum_mean_last(a),
        bg.accum_rms_last(a, 1e-6),
        bg.accum_max_last(a),
        bg.accum_exp_sum_last(a),
        bg.accum_sum(bg.exp(a)),
    ]
    for t in outs:
        bg.new_output(t, (-1, -1, -1))
    for t in g.customized([A, B], bg):
        g.mark_output(t)
    return g


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_op_and_accumulator_computes_what_the_interpreter_does_emulated(
    cuda_include, dtype, tmp_path
):
    graphs = [every_op_graph(dtype), every_accumulator_graph(dtype)]
    assert len(check_emulated(graphs, tmp_path, f"every op {dtype}")) == 2


def largest_limit_where(bg, marker: str) -> int:
    """The most shared memory (in KiB steps below ARCHS' limit) for which the unsplit kernel
    of `bg` contains `marker`."""
    for kib in range(toolchain.shared_memory_limit(ARCHS) // 1024, 0, -1):
        try:
            if marker in _core.generate_cuda_kernel(bg, "probe", kib * 1024, False, 1):
                return kib * 1024
        except ValueError:
            break
    raise AssertionError(f"no limit gives a kernel with {marker!r}")


def test_single_buffered_tiles_compute_the_same_emulated(cuda_include, tmp_path):
    """Short of shared memory for two stages, body tiles keep one, loaded at the start of
    every iteration instead of during the previous one."""
    marker = "// this iteration's single-buffered tiles"
    graphs = [
        PROGRAMS[name].build(**FRAGMENT_SIZED[name], dtype=dtype)[1]
        for name in ("rmsnorm_linear", "gated_mlp", "flash_attention_online")
        for dtype in ("float32", "bfloat16")
    ]
    kernels = check_emulated(
        graphs, tmp_path, "single-buffered", lambda bg: largest_limit_where(bg, marker), sm_count=1
    )
    assert all(marker in s for s in kernels.values())


def smallest_limit(bg) -> int:
    """The least shared memory (in KiB steps) a block graph's kernel can be planned for."""
    for kib in range(1, 256):
        try:
            _core.generate_cuda_kernel(bg, "probe", kib * 1024, False, 1)
            return kib * 1024
        except ValueError:
            continue
    raise AssertionError("no limit up to 256 KiB fits")


def test_input_tiles_read_from_global_memory_compute_the_same_emulated(cuda_include, tmp_path):
    """Planned for the least shared memory they can run in, kernels read the input tiles that
    do not fit in place from the kernel tensors instead of staging them (the plan's fallback
    for tiles too large for shared memory)."""
    graphs = [
        PROGRAMS[name].build(**shapes, dtype="bfloat16")[1]
        for name, shapes in FRAGMENT_SIZED.items()
    ]
    kernels = check_emulated(
        graphs, tmp_path, "inputs in global memory", smallest_limit, sm_count=1
    )
    in_place = [s for s in kernels.values() if re.search(r"\] const \w+\* const t\d+ = io\.in", s)]
    assert len(in_place) >= len(FRAGMENT_SIZED), (
        f"only {len(in_place)} of {len(kernels)} kernels read an input in place"
    )


def test_search_result_kernels_compute_what_the_interpreter_does_emulated(
    cuda_include, search_results, tmp_path
):
    graphs = [g for fused in search_results.values() for g in fused]
    assert len(check_emulated(graphs, tmp_path, "search results")) >= len(SEARCHES)


def test_tf32_kernels_compute_what_the_interpreter_does_emulated(cuda_include, tmp_path):
    """float32 matmuls on TF32 tensor cores (allowed at jax's default precision): operands
    rounded to TF32 by cvt.rna, fragments of mma.m16n8k8, A's through ldmatrix."""
    graphs = [
        PROGRAMS[name].build(**shapes, dtype="float32")[1]
        for name, shapes in FRAGMENT_SIZED.items()
    ]
    kernels = check_emulated(graphs, tmp_path, "tf32", tf32=True)
    bodies = [s[s.index("_kernel {") :] for s in kernels.values()]
    assert sum("mj_cuda::mma_m16n8k8_tf32(" in b for b in bodies) >= len(FRAGMENT_SIZED)
    assert any("mj_cuda::ldsm_x4(" in b for b in bodies)


def test_fragment_kernels_use_ldmatrix_and_register_state():
    """What the emulated checks above run through: ldmatrix for 16-bit operands, products
    accumulated in registers across the loop, the online softmax's state in registers."""
    bodies = []
    for name, shapes in FRAGMENT_SIZED.items():
        _, fused = PROGRAMS[name].build(**shapes, dtype="bfloat16")
        bodies += [s[s.index("_kernel {") :] for s in kernels_of(fused).values()]
    text = "\n".join(bodies)
    for marker in (
        "mj_cuda::ldsm_x4(",
        "mj_cuda::ldsm_x2_trans(",
        "float smax0[",
        "mj_cuda::mma_m16n8k16<__nv_bfloat16>(mm",
    ):
        assert marker in text, marker


def huge_graph() -> tuple[mj.KernelGraph, tuple[int, int, int]]:
    """X [16, 2^28] bf16 (2^32 elements): blocks own 512 columns; each sums its 16 rows
    (reduce over dim 0) and stores x², both as bf16. Row 15 of a tile lies 15 * 2^28 elements
    into X: 32-bit index arithmetic wraps there. Returns the graph and its last block."""
    cols = 1 << 28
    g = mj.KernelGraph()
    X = g.new_input((16, cols), "bfloat16")
    bg = mj.BlockGraph(grid=(cols // 512, 1, 1), forloop_range=1)
    x = bg.new_input(X, (1, -1, -1), -1)
    bg.new_output(bg.reduce(x, 0, "sum"), (1, -1, -1))
    bg.new_output(bg.square(x), (1, -1, -1), dtype="bfloat16")
    for t in g.customized([X], bg):
        g.mark_output(t)
    return g, (cols // 512 - 1, 0, 0)


def sparse_array(shape, dtype) -> np.ndarray:
    """A zero array of any size whose pages are only allocated when touched."""
    import mmap

    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    buffer = mmap.mmap(
        -1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
    )
    return np.frombuffer(buffer, dtype=dtype).reshape(shape)


def test_tensors_of_over_2_to_31_elements_are_indexed_in_64_bits_emulated(cuda_include, tmp_path):
    graph, last = huge_graph()
    op = next(o for o in graph.ops if o.kind == "customized")
    symbol = _core.cuda_kernel_symbol(op.block_graph._core)
    source = _core.generate_cuda_kernel(
        op.block_graph._core, symbol, toolchain.shared_memory_limit(ARCHS)
    )
    library = build_emulation(source, tmp_path)
    x = sparse_array((16, 1 << 28), jnp.bfloat16)
    sums = sparse_array((1, 1 << 28), jnp.bfloat16)
    squares = sparse_array((16, 1 << 28), jnp.bfloat16)
    cols = slice((1 << 28) - 512, 1 << 28)  # the last block's columns
    rng = np.random.default_rng(0)
    tile = rng.standard_normal((16, 512)).astype(jnp.bfloat16)
    x[:, cols] = tile
    pointers = (ctypes.c_void_p * 3)(x.ctypes.data, sums.ctypes.data, squares.ctypes.data)
    getattr(library, "run_block_" + symbol)(pointers, *[ctypes.c_uint(v) for v in last])
    assert emulation_failure(library) is None
    want = tile.astype(np.float64)
    assert_close(
        sums[:, cols],
        want.sum(axis=0, keepdims=True),
        storage_rtol("bfloat16"),
        "column sums of the last block",
        floor=1.0,
    )
    assert_close(
        squares[:, cols], want**2, storage_rtol("bfloat16"), "squares of the last block", floor=1.0
    )


def test_misaligned_buffers_take_element_loads_emulated(cuda_include, tmp_path):
    """A base pointer aligned less than the plan's cp.async width (XLA never passes one, a
    caller outside XLA might) is loaded element by element: right results, and no cp.async
    on a misaligned address (the emulation records one)."""
    _, fused = PROGRAMS["rmsnorm_linear"].build(
        **FRAGMENT_SIZED["rmsnorm_linear"], dtype="bfloat16"
    )
    kernels = kernels_of(fused)
    library = build_emulation("\n".join(kernels.values()), tmp_path)
    op = next(o for o in fused.ops if o.kind == "customized")
    inputs = [np.asarray(v) for v in random_inputs(fused, seed=4)]
    shifted = []
    for v in inputs:
        room = np.zeros(v.size + 1, dtype=v.dtype)  # one element off any 16-byte boundary
        view = room[1:].reshape(v.shape)
        view[...] = v
        assert view.ctypes.data % 4 != 0
        shifted.append(view)
    outs = [np.zeros(t.shape, dtype=jnp.dtype(t.dtype)) for t in op.outputs]
    pointers = (ctypes.c_void_p * (len(shifted) + len(outs)))(
        *[a.ctypes.data for a in shifted], *[o.ctypes.data for o in outs]
    )
    getattr(library, "run_" + _core.cuda_kernel_symbol(op.block_graph._core))(pointers)
    assert emulation_failure(library) is None
    want = fused.evaluate(inputs)
    assert_close(outs[0], want[0], kernel_rtol("bfloat16"), "misaligned inputs", floor=1.0)


# ------------------------------------------------------------------ machine code (SASS)
# The instructions the plan asks for must be what ptxas emits: ldmatrix (LDSM), tensor-core
# mma (HMMA, 16-bit and TF32) and cp.async (LDGSTS). cuobjdump ships with the CUDA toolkit,
# or as the nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels (the test extra).


def find_cuobjdump() -> str | None:
    import importlib.util
    import shutil

    found = shutil.which("cuobjdump")
    if found:
        return found
    candidates = []
    with contextlib.suppress(KernelCompileError):
        candidates.append(Path(toolchain.find_nvcc()).resolve().parent)
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += sorted(Path(root).glob("cu*/bin"))
    for directory in candidates:
        if (directory / "cuobjdump").is_file() and (directory / "nvdisasm").is_file():
            return str(directory / "cuobjdump")
    return None


@pytest.fixture(scope="module")
def sass(nvcc, tmp_path_factory) -> dict[str, str]:
    """SASS per architecture of two paper kernels at the paper's shapes, compiled once: a
    bf16 RMSNorm+Linear and an f32 one with TF32 allowed."""
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        pytest.skip(
            "reading SASS needs cuobjdump and nvdisasm (CUDA toolkit, or the "
            "nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels)"
        )
    limit = toolchain.shared_memory_limit(ARCHS)
    sources = []
    for dtype, tf32 in (("bfloat16", False), ("float32", True)):
        _, fused = PROGRAMS["rmsnorm_linear"].build(dtype=dtype)
        op = next(o for o in fused.ops if o.kind == "customized")
        bg = op.block_graph._core
        sources.append(_core.generate_cuda_kernel(bg, _core.cuda_kernel_symbol(bg), limit, tf32))
    directory = tmp_path_factory.mktemp("sass")
    unit = directory / "kernels.cu"
    unit.write_text("\n".join(sources))
    obj = directory / "kernels.o"
    done = subprocess.run(
        [*toolchain._nvcc_command(ARCHS), "-c", str(unit), "-o", str(obj)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    env = dict(os.environ, PATH=f"{Path(cuobjdump).parent}:{os.environ.get('PATH', '')}")
    dump = subprocess.run([cuobjdump, "-sass", str(obj)], capture_output=True, text=True, env=env)
    assert dump.returncode == 0, dump.stderr[-2000:]
    per_arch = {}
    for arch in ARCHS:
        sections = re.split(r"\n\s*arch = ", dump.stdout)
        per_arch[arch] = "\n".join(sec for sec in sections if sec.startswith(f"sm_{arch}"))
        assert per_arch[arch], f"no SASS for sm_{arch} in the object"
    return per_arch


@pytest.mark.parametrize("arch", ARCHS)
def test_sass_loads_fragments_with_ldmatrix_and_multiplies_on_tensor_cores(sass, arch):
    code = sass[arch]
    for instruction in (
        "LDSM.16.M88.4",
        "LDSM.16.MT88",
        "HMMA.16816.F32.BF16",
        "HMMA.1688.F32.TF32",
        "LDGSTS.E.128",
    ):
        assert instruction in code, f"sm_{arch}: no {instruction} in the SASS"


# ------------------------------------------------------------------ roofline, benchmarks


def test_cuda_plan_prints_each_kernels_roofline_share(capsys):
    from mirage_jax.cli import main as cli

    assert (
        cli.main(["cuda-plan", "--small", "--dtype", "bfloat16", "--target", "h200", "gqa_decode"])
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("h200:") == 2  # the split-KV kernel and the combine kernel
    assert re.search(r"\d+% of roofline", out) and "block(s)/SM" in out
    assert cli.main(["cuda-plan", "no_such_program"]) == 2


def test_explain_lines_name_every_kernel():
    from mirage_jax.runtime import cuda_roofline

    _, fused = PROGRAMS["gqa_decode"].build(**PROGRAMS["gqa_decode"].small)
    lines = cuda_roofline.roofline_lines(fused, "NVIDIA H100 80GB HBM3")
    assert len(lines) == 3 and all("h100:" in line for line in lines[1:])


def test_benchmark_checks_f32_against_a_float32_reference_with_tf32_tolerance():
    """XLA at jax's default precision runs float32 dots on TF32 on a GPU: the benchmark's
    reference is XLA at "highest", and the tolerance is TF32's where XLA (and the kernels)
    may use it, float32's otherwise."""
    import importlib.util
    import sys

    import jax

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "run.py"
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location("bench_run", path)
        run = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(run)
    finally:
        sys.path.remove(str(path.parent))
    assert run.tolerance_for("cpu") == run.TOLERANCE
    assert run.tolerance_for("cuda") == run.TF32_TOLERANCE > 1e-3
    with jax.default_matmul_precision("highest"):
        assert run.tolerance_for("cuda") == run.TOLERANCE
    source = path.read_text()
    assert 'with jax.default_matmul_precision("highest"):\n        want = ' in source


def test_the_float_check_allows_tf32_only_when_asked():
    """superoptimize on the GPU at jax's default precision compares kernels with XLA when
    both may round float32 matmul operands to TF32: the float32 floor becomes TF32's; the
    16-bit bounds are already wider and do not change."""
    from mirage_jax.superopt import float_check as _float_check

    assert _float_check.tolerance(["float32"]) == 2.0**-13
    assert _float_check.tolerance(["float32"], tf32=True) == 2.0**-9
    assert _float_check.tolerance(["float32", "bfloat16"], tf32=True) == 4 * 2.0**-7
    got, want = [np.float32([1.0 + 1e-3, 2.0])], [np.float32([1.0, 2.0])]
    assert not _float_check.check_outputs(got, want, ["float32"])
    assert _float_check.check_outputs(got, want, ["float32"], tf32=True)


def test_a_machine_without_nvcc_loads_what_a_build_machine_shipped(tmp_path, monkeypatch):
    """Serving machines have the driver but no toolkit: the cache finds the library built
    elsewhere (same source, flags and architectures, any toolkit), refuses one whose toolkit
    needs a newer driver, and says what to ship when there is none."""
    monkeypatch.setenv("MIRAGE_JAX_CACHE", str(tmp_path))
    symbol, source = "mj_cuda_shipped", "// a kernel\n"

    def build_elsewhere(source_path, library, options):
        # Any loadable library exporting the handler stands for nvcc's (the probe loads it).
        stub = source_path.with_name("stub.cc")
        stub.write_text(f'extern "C" void {symbol}() {{}}\n')
        subprocess.run(["g++", "-shared", "-fPIC", str(stub), "-o", str(library)], check=True)
        stub.unlink()

    shipping = dataclasses.replace(backends.CUDA, build=build_elsewhere)

    def no_nvcc():
        raise KernelCompileError("nvcc was not found on PATH")

    monkeypatch.setattr(toolchain, "toolkit_version", no_nvcc)
    with pytest.raises(
        KernelCompileError, match=r"no nvcc here and no prebuilt kernel.*cache export"
    ):
        kernel_cache.library_for(source, shipping, symbol=symbol)
    monkeypatch.setattr(toolchain, "toolkit_version", lambda: "13.0.88")
    built = kernel_cache.library_for(source, shipping, symbol=symbol)
    monkeypatch.setattr(toolchain, "toolkit_version", no_nvcc)
    monkeypatch.setattr(toolchain, "_driver_cache", (13020, (), ()))
    assert kernel_cache.library_for(source, shipping, symbol=symbol) == built
    monkeypatch.setattr(toolchain, "_driver_cache", (12080, (), ()))
    with pytest.raises(
        KernelCompileError,
        match=r"built by CUDA 13.0.88, which needs a newer driver than this machine's "
        r"\(CUDA 12.8\)",
    ):
        kernel_cache.library_for(source, shipping, symbol=symbol)


def test_max_propagates_nan_from_any_position_emulated(cuda_include, tmp_path):
    """A NaN anywhere in a row makes its max NaN (and the online softmax's sums), whichever
    side of the comparison it lands on in the loop or the warp's shuffle tree."""
    g = mj.KernelGraph()
    X = g.new_input((4, 64), "float32")
    bg = mj.BlockGraph(grid=(1, 1, 1), forloop_range=2)
    x = bg.new_input(X, (-1, -1, -1), 1)
    bg.new_output(bg.accum_max_last(x), (-1, -1, -1))
    bg.new_output(bg.accum_exp_sum_last(x), (-1, -1, -1))
    for t in g.customized([X], bg):
        g.mark_output(t)
    op = next(o for o in g.ops if o.kind == "customized")
    symbol = _core.cuda_kernel_symbol(op.block_graph._core)
    library = build_emulation(
        _core.generate_cuda_kernel(op.block_graph._core, symbol, 163 * 1024), tmp_path
    )
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    x[0, 0] = x[1, 31] = x[2, 63] = np.nan  # first, a lane's last, the row's last
    maxes, sums = run_kernel(library, op, [x])
    assert np.isnan(maxes[:3, 0]).all() and np.isnan(sums[:3, 0]).all()
    np.testing.assert_allclose(maxes[3, 0], x[3].max(), rtol=0)
    np.testing.assert_allclose(sums[3, 0], np.exp(x[3] - x[3].max()).sum(), rtol=1e-5)


def test_a_stored_accumulator_the_epilogue_reads_emulated(cuda_include, tmp_path):
    """q and cos * q from one sum (tests/runtime/test_stored_accumulator.py runs it on the
    CPU): the CUDA kernel stores the accumulator and multiplies it after the loop."""
    graphs = [projection_and_rope_product(dtype) for dtype in ("float32", "bfloat16")]
    assert len(check_emulated(graphs, tmp_path, "stored accumulator")) == 2

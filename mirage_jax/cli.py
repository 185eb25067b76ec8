"""python -m mirage_jax <command>. Commands: demo, cache, inspect, cuda-plan.

demo: the paper's RMSNorm+Linear μGraph end to end. It builds the reference and the fused
graph at the paper's shapes, prints both, verifies them with finite-field fingerprints, runs
both under the float32 interpreter on random data, superoptimizes the reference (search,
compile, time against XLA: what it found, how it was checked, the speedup), and shows that
broken variants of the fused graph are rejected. The exit status is 0 exactly when every
check came out as it should (the speedup is reported, not checked: it depends on the machine).

cache {list,verify,clear,export,import}: the on-disk caches of search results and compiled
kernels, under $MIRAGE_JAX_CACHE, else ~/.cache/mirage_jax (see
mirage_jax/runtime/cache_admin.py); export/import move them to another machine as one archive.

inspect MODULE:FUNCTION: @mj.optimize the function for example arguments and print each
region, its source lines, the μGraph chosen, how it was verified and the measured speedup
(see mirage_jax/_inspect.py for where the example arguments come from).

cuda-plan [PROGRAM ...]: how the CUDA generator plans the paper's programs and each
kernel's estimated share of an A100/H100/H200 roofline (mirage_jax/cli_cuda.py); no GPU
needed.
"""

from __future__ import annotations

import argparse
import os
import json
import math
import time

import numpy as np

import mirage_jax as mj
from mirage_jax import paper_graphs

# The paper's shapes (DESIGN.md §9). Interpreting them (~200M multiply-adds per graph) takes
# about a second here; --small keeps the same tiles at an eighth of the size, for quick runs.
PAPER_SHAPES = dict(batch=8, hidden=4096, out_features=6144, col_tile=64, k_tile=128)
SMALL_SHAPES = dict(batch=8, hidden=512, out_features=768, col_tile=64, k_tile=128)
EPS = 1e-6
# float32 interpreter, fused vs reference: the two sum 4096 products in different orders, so
# they differ by a few float32 ulps of the output scale.
RELATIVE_TOLERANCE = 1e-4
# One kernel-level op (the customized one) of up to five block ops: enough for the fused
# RMSNorm+Linear, a search of seconds here.
DEMO_SEARCH = mj.SearchConfig(max_kernel_ops=1, max_block_ops=5, time_budget_s=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mirage_jax",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuda-arch", metavar="ARCHS", dest="cuda_arch",
                        help="CUDA architectures to compile kernels for, e.g. 80,90a (sets "
                             "$MIRAGE_JAX_CUDA_ARCH; default: the visible GPU's)")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="RMSNorm+Linear: build, print, verify, interpret")
    demo.add_argument("--small", action="store_true",
                      help="interpret at X[8,512], W[512,768] instead of the paper's shapes "
                           "(verification is always at the paper's shapes)")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random test data")
    demo.add_argument("--no-superoptimize", action="store_true",
                      help="skip the search/compile/timing step (about 10 s cold)")
    cache_command = commands.add_parser(
        "cache", help="list, verify or clear the search and kernel caches")
    actions = cache_command.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="each entry's kind (search/kernel), key, size and age")
    actions.add_parser("verify", help="check every entry's checksum and remove the corrupt "
                                      "ones (exit status 1 when there were any)")
    clear = actions.add_parser("clear", help="remove every entry (only with --yes; without "
                                             "it, print what would be removed)")
    clear.add_argument("--yes", action="store_true", help="really remove them")
    export = actions.add_parser("export", help="write every sound entry to a .tar.gz archive "
                                               "(to deploy on another machine)")
    export.add_argument("path", help="the archive to write")
    import_ = actions.add_parser("import", help="add the entries of an exported archive, "
                                                "refusing any that fail their checksums")
    import_.add_argument("path", help="the archive to read")
    _add_inspect(commands)
    plan = commands.add_parser("cuda-plan", help="the CUDA plan of the paper's programs and "
                                                 "each kernel's estimated share of a GPU's "
                                                 "roofline (no GPU needed)")
    plan.add_argument("programs", nargs="*", metavar="PROGRAM",
                      help="paper programs (default: all), e.g. rmsnorm_linear gqa_decode")
    plan.add_argument("--target", choices=["a100", "h100", "h200"], default="h100")
    plan.add_argument("--dtype", action="append", choices=["bfloat16", "float32", "float16"],
                      help="repeat for several (default: bfloat16 and float32)")
    plan.add_argument("--small", action="store_true", help="the small test shapes")
    plan.add_argument("--no-tf32", action="store_true",
                      help="float32 matmuls at full precision (CUDA-core FMA), as under "
                           "jax.default_matmul_precision('highest')")
    args = parser.parse_args(argv)
    if args.cuda_arch is not None:
        from mirage_jax.runtime import cuda_compiler

        try:
            cuda_compiler.parse_archs(args.cuda_arch)
        except cuda_compiler.KernelCompileError as e:
            parser.error(f"--cuda-arch: {e}")
        os.environ[cuda_compiler.ARCH_ENV] = args.cuda_arch
    if args.command == "inspect":
        from mirage_jax._inspect import run_inspect

        return run_inspect(args.target, specs=args.arg, args_from=args.args, seed=args.seed,
                           backend=args.backend, min_region_flops=args.min_region_flops,
                           budget=args.budget)
    if args.command == "cuda-plan":
        from mirage_jax.cli_cuda import run_cuda_plan

        return run_cuda_plan(args.programs, args.target, args.dtype or ["bfloat16", "float32"],
                             args.small, not args.no_tf32, args.cuda_arch)
    if args.command == "demo":
        return run_demo(small=args.small, seed=args.seed,
                        superoptimize=not args.no_superoptimize)
    if args.command == "cache":
        from mirage_jax.cli_cache import run_cache

        return run_cache(args.action, yes=getattr(args, "yes", False),
                         path=getattr(args, "path", None))
    parser.error(f"unknown command {args.command!r}")
    return 2


def _add_inspect(commands) -> None:
    from mirage_jax import _inspect

    inspect = commands.add_parser(
        "inspect", help="optimize MODULE:FUNCTION for example arguments; explain each region",
        description=_inspect.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    inspect.add_argument("target", metavar="MODULE:FUNCTION",
                         help="e.g. mypkg.model:forward or path/to/model.py:Block.forward")
    inspect.add_argument("--arg", action="append", default=[], metavar="DTYPE[SHAPE]",
                         help="one positional array argument, random normal: f32[8,256], "
                              "bf16[64], f32[] (repeat in order)")
    inspect.add_argument("--args", metavar="MODULE:CALLABLE",
                         help="a callable returning the positional arguments (a tuple) or "
                              "{'args': ..., 'kwargs': ...}; ':CALLABLE' looks in TARGET's "
                              "module")
    inspect.add_argument("--seed", type=int, default=0, help="seed of the --arg values")
    inspect.add_argument("--backend", choices=["auto", "cpu", "cuda", "xla"],
                         help="override the function's backend (default: its own, or auto)")
    inspect.add_argument("--min-region-flops", type=float, dest="min_region_flops",
                         help="regions below this run as plain JAX")
    inspect.add_argument("--budget", type=float, metavar="SECONDS",
                         help="search time budget per region")


def run_demo(small: bool, seed: int, superoptimize: bool = True) -> int:
    ref, fused = paper_graphs.rmsnorm_linear(**PAPER_SHAPES, eps=EPS)
    _heading("mirage_jax demo: RMSNorm + Linear, Y = rms_norm(X) * G @ W")
    print(f"X[{PAPER_SHAPES['batch']}, {PAPER_SHAPES['hidden']}], G[{PAPER_SHAPES['hidden']}], "
          f"W[{PAPER_SHAPES['hidden']}, {PAPER_SHAPES['out_features']}], eps = {EPS:g}")
    _heading("reference μGraph (what the user wrote: one op per kernel)")
    print(ref)
    _heading("fused μGraph (the paper's: one kernel, the norm divided out after the matmul)")
    print(fused)

    checks = {}
    _heading("verification: finite-field fingerprints")
    checks["verifier accepts the fused graph"] = _report_verification(ref, fused)

    shapes = SMALL_SHAPES if small else PAPER_SHAPES
    _heading("interpreter: float32, random data, X[{batch}, {hidden}] W[{hidden}, {out_features}]"
             .format(**shapes))
    checks["interpreter outputs agree"] = _report_interpretation(shapes, seed)

    if superoptimize:
        _heading("superoptimize the reference: search, compile, time against XLA")
        small_ref, _ = paper_graphs.rmsnorm_linear(**shapes, eps=EPS)
        checks["superoptimized function matches XLA"] = _report_superoptimize(small_ref, seed)

    _heading("broken variants of the fused graph (each must be rejected)")
    for description, mutant in _mutants(fused):
        result = mj.verify_equivalent(ref, mutant)
        print(f"  {description:<46} {'ACCEPTED (wrong!)' if result else 'rejected'}")
        if not result:
            print(f"      reason: {result.reason}")
        checks[f"rejects: {description}"] = not result

    _heading("verdict")
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {name}")
    passed = all(checks.values())
    print("PASS: the fused μGraph computes RMSNorm + Linear, and broken variants are caught."
          if passed else "FAIL: see the checks marked FAILED above.")
    return 0 if passed else 1


def _report_superoptimize(ref: mj.KernelGraph, seed: int) -> bool:
    import jax

    start = time.perf_counter()
    fast = mj.superoptimize(ref, config=DEMO_SEARCH, progress=False)
    print(f"  (superoptimize took {time.perf_counter() - start:.1f} s; a warm cache skips the "
          f"search and the compiler)")
    print("\n".join("  " + line for line in fast.report().splitlines()))
    rng = np.random.default_rng(seed)
    inputs = [jax.device_put(rng.standard_normal(t.shape).astype(np.float32))
              for t in ref.inputs]
    (got,) = jax.jit(fast)(*inputs)
    (want,) = jax.jit(mj.compile(ref))(*inputs)
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    print(f"  jax.jit(superoptimized) vs jax.jit(original) on new random data: normwise error "
          f"{error:.2g} (tolerance {RELATIVE_TOLERANCE:g})")
    return error <= RELATIVE_TOLERANCE


def _report_verification(ref: mj.KernelGraph, fused: mj.KernelGraph) -> bool:
    start = time.perf_counter()
    result = mj.verify_equivalent(ref, fused)
    elapsed = time.perf_counter() - start
    print(f"  equivalent:         {'yes' if result else 'NO: ' + result.reason}")
    print(f"  trials:             {result.trials}")
    print(f"  false-accept bound: 2^{math.log2(result.false_accept_bound):.1f}")
    shrunk = "yes (same grids and for-loops, tiny tiles)" if result.shrunk else "no"
    print(f"  shrunk instance:    {shrunk}")
    print(f"  time:               {elapsed:.3f} s")
    return bool(result)


def _report_interpretation(shapes: dict, seed: int) -> bool:
    ref, fused = paper_graphs.rmsnorm_linear(**shapes, eps=EPS)
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(t.shape, dtype=np.float32) for t in ref.inputs]
    timings = {}
    outputs = {}
    for name, graph in (("reference", ref), ("fused", fused)):
        start = time.perf_counter()
        (outputs[name],) = graph.evaluate(inputs, dtype="float32")
        timings[name] = time.perf_counter() - start
    diff = np.abs(outputs["fused"].astype(np.float64) - outputs["reference"])
    scale = float(np.max(np.abs(outputs["reference"])))
    max_abs = float(diff.max())
    max_rel = max_abs / scale
    print(f"  interpreter time:   reference {timings['reference']:.2f} s, "
          f"fused {timings['fused']:.2f} s")
    print(f"  output scale:       max |Y| = {scale:.4g}")
    print(f"  max abs error:      {max_abs:.3g}")
    print(f"  max rel error:      {max_rel:.3g} (of max |Y|; tolerance {RELATIVE_TOLERANCE:g})")
    return max_rel <= RELATIVE_TOLERANCE


def _mutants(fused: mj.KernelGraph):
    """(description, graph) pairs, each the fused graph with one block-graph attribute
    changed, rebuilt through JSON so the IR re-checks it."""
    yield "eps dropped from the epilogue", _with_block_op(fused, "add_scalar", scalar=0.0)
    yield "sum of x² where the mean is needed", _with_block_op(
        fused, "accum_mean_last", kind="accum_sum_last")
    # blocks stacked along the rows: a [768, 64] output instead of [8, 6144]
    yield "output tiles stored along the rows (omap)", _with_block_op(
        fused, "output", omap=[0, -1, -1])


def _with_block_op(graph: mj.KernelGraph, op_kind: str, /, **attrs) -> mj.KernelGraph:
    """The graph with attributes of the first `op_kind` op of its first block graph
    replaced."""
    doc = json.loads(graph.to_json())
    block = next(op for op in doc["ops"] if op["kind"] == "customized")["block_graph"]
    target = next(op for op in block["ops"] if op["kind"] == op_kind)
    target.update(attrs)
    return mj.KernelGraph.from_json(json.dumps(doc))


def _heading(text: str) -> None:
    print(f"\n== {text} ==")

"""python -m mirage_jax <command>. Commands: demo, cache, inspect, cuda-plan, calibrate.

demo: the paper's RMSNorm+Linear μGraph end to end (mirage_jax/cli/demo.py).

cache {list,verify,clear,export,import,keygen}: the on-disk caches of search results and
compiled kernels, under $MIRAGE_JAX_CACHE, else ~/.cache/mirage_jax (see
mirage_jax/cache/admin.py); export/import move them to another machine as one signed archive
(mirage_jax/cache/archive.py).

inspect MODULE:FUNCTION: @mj.optimize the function for example arguments and print each
region, its source lines, the μGraph chosen, how it was verified and the measured speedup
(see mirage_jax/cli/inspect.py for where the example arguments come from).

cuda-plan [PROGRAM ...]: how the CUDA generator plans the paper's programs and each
kernel's estimated share of an A100/H100/H200 roofline (mirage_jax/cli/cuda_plan.py); no GPU
needed.

calibrate [--remeasure]: the numbers the CPU cost model ranks with on this machine, measured
once and kept in the cache (mirage_jax/cli/calibrate.py).
"""

from __future__ import annotations

import argparse
import os

from mirage_jax.cli import cache as cache_cli
from mirage_jax.cli import calibrate, cuda_plan
from mirage_jax.cli import inspect as _inspect
from mirage_jax.cli.demo import run_demo
from mirage_jax.runtime import toolchain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mirage_jax", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--cuda-arch",
        metavar="ARCHS",
        dest="cuda_arch",
        help="CUDA architectures to compile kernels for, e.g. 80,90a (sets "
        "$MIRAGE_JAX_CUDA_ARCH; default: the visible GPU's)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="RMSNorm+Linear: build, print, verify, interpret")
    demo.add_argument(
        "--small",
        action="store_true",
        help="interpret at X[8,512], W[512,768] instead of the paper's shapes "
        "(verification is always at the paper's shapes)",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the random test data")
    demo.add_argument(
        "--no-superoptimize",
        action="store_true",
        help="skip the search/compile/timing step (about 10 s cold)",
    )
    cache_cli.add_parser(commands)
    _add_inspect(commands)
    cuda_plan.add_parser(commands)
    calibrate.add_parser(commands)
    args = parser.parse_args(argv)
    if args.cuda_arch is not None:
        try:
            toolchain.parse_archs(args.cuda_arch)
        except toolchain.KernelCompileError as e:
            parser.error(f"--cuda-arch: {e}")
        os.environ[toolchain.ARCH_ENV] = args.cuda_arch
    if args.command == "inspect":
        return _inspect.run_inspect(
            args.target,
            specs=args.arg,
            args_from=args.args,
            seed=args.seed,
            backend=args.backend,
            min_region_flops=args.min_region_flops,
            budget=args.budget,
        )
    if args.command == "cuda-plan":
        return cuda_plan.run(args)
    if args.command == "demo":
        return run_demo(small=args.small, seed=args.seed, superoptimize=not args.no_superoptimize)
    if args.command == "cache":
        return cache_cli.run(args)
    if args.command == "calibrate":
        return calibrate.run(args)
    parser.error(f"unknown command {args.command!r}")
    return 2


def _add_inspect(commands) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="optimize MODULE:FUNCTION for example arguments; explain each region",
        description=_inspect.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect.add_argument(
        "target",
        metavar="MODULE:FUNCTION",
        help="e.g. mypkg.model:forward or path/to/model.py:Block.forward",
    )
    inspect.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="DTYPE[SHAPE]",
        help="one positional array argument, random normal: f32[8,256], "
        "bf16[64], f32[] (repeat in order)",
    )
    inspect.add_argument(
        "--args",
        metavar="MODULE:CALLABLE",
        help="a callable returning the positional arguments (a tuple) or "
        "{'args': ..., 'kwargs': ...}; ':CALLABLE' looks in TARGET's "
        "module",
    )
    inspect.add_argument("--seed", type=int, default=0, help="seed of the --arg values")
    inspect.add_argument(
        "--backend",
        choices=["auto", "cpu", "cuda", "xla"],
        help="override the function's backend (default: its own, or auto)",
    )
    inspect.add_argument(
        "--min-region-flops",
        type=float,
        dest="min_region_flops",
        help="regions below this run as plain JAX",
    )
    inspect.add_argument(
        "--budget", type=float, metavar="SECONDS", help="search time budget per region"
    )

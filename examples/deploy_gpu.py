"""Deploying an optimized model: search and compile once, serve elsewhere with neither.

On the build machine (a GPU box, where the kernels are searched, compiled and timed for
the GPU they will run on), `build` optimizes the model of examples/flax_inference.py once at
the serving shapes and exports mirage_jax's cache into one archive signed with the
publisher's key, `python -m mirage_jax cache export PATH --sign KEY` (make the key pair once
with `python -m mirage_jax cache keygen KEY KEY.pub`). On each serving machine (the same GPU
model, the same mirage_jax, jax and compiler versions: the cache keys include them), `serve`
imports the archive with `python -m mirage_jax cache import PATH --verify KEY.pub` (which
checks the signature, every file's checksum, and loads every library in a separate process
first; it refuses anything that fails) and serves: every region's search result and kernel
come from the cache, so nothing is searched and nothing is compiled. `serve` checks that,
and fails if the cache had to grow. `demo` does both on this machine with temporary caches
and a temporary key pair. Signing needs mirage_jax's `sign` extra.

    python examples/deploy_gpu.py build --archive kernels.tar.gz --sign-key KEY [--small]
    python examples/deploy_gpu.py serve --archive kernels.tar.gz --verify-key KEY.pub [--small]
    python examples/deploy_gpu.py demo [--small] [--build-cache DIR]

(build and serve also take --cache-dir DIR.)

Without a GPU visible to jax the script says so and runs the same steps on the CPU path
(backend "cpu": CPU kernels, which are built for this CPU: serve them on the same kind of
machine). The model's weights are random from a seed here; a real deployment loads its
checkpoint on both sides (the kernels depend only on the shapes, not on the weights).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flax_inference import SMALL, Config, greedy_decode
from flax_inference import build as build_model

import mirage_jax as mj
from mirage_jax.cache import admin as cache_admin


def pick_backend() -> str:
    """ "cuda" where jax sees a GPU, else "cpu" (and say so)."""
    platforms = {d.platform for d in jax.devices()}
    if "gpu" in platforms:
        print(f"GPU visible to jax ({jax.devices()[0].device_kind}): backend cuda")
        return "cuda"
    print(
        f"no GPU visible to jax (devices: {', '.join(sorted(platforms))}): running the CPU "
        f"path (backend cpu). On a GPU box the same commands build and ship CUDA kernels."
    )
    return "cpu"


def cache_cli(action: str, cache_dir: Path, *args) -> str:
    """Runs `python -m mirage_jax cache <action> <args>` on `cache_dir`; its output."""
    done = subprocess.run(
        [sys.executable, "-P", "-m", "mirage_jax", "cache", action, *map(str, args)],
        env={**os.environ, "MIRAGE_JAX_CACHE": str(cache_dir)},
        capture_output=True,
        text=True,
    )
    print(done.stdout.rstrip())
    if done.returncode != 0:
        raise SystemExit(
            f"`python -m mirage_jax cache {action} {' '.join(map(str, args))}` failed "
            f"(status {done.returncode}):\n{done.stderr[-2000:]}"
        )
    return done.stdout


def entry_keys(cache_dir: Path) -> set:
    return {(e.kind, e.key) for e in cache_admin.entries(cache_dir)}


class Model:
    """The model, its optimized forward pass, and the serving shapes."""

    def __init__(self, cfg: Config, backend: str, cache_dir: Path):
        self.cfg = cfg
        forward, self.params, self.prompt = build_model(cfg)
        self.optimized = mj.optimize(forward, backend=backend, cache_dir=cache_dir)
        self.buffer = (
            jnp.zeros((self.prompt.shape[0], cfg.max_len), jnp.int32)
            .at[:, : self.prompt.shape[1]]
            .set(self.prompt)
        )

    def warm_up(self) -> float:
        """The first call at the serving shapes (specializes); its seconds."""
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fallback regions are reported below
            jax.block_until_ready(self.optimized(self.params, self.buffer))
        return time.perf_counter() - start

    def decode(self, new_tokens: int):
        tokens, times = greedy_decode(
            self.optimized, self.params, self.prompt, new_tokens, self.cfg.max_len
        )
        return tokens, float(np.median(times))


def build(cfg: Config, archive: Path, cache_dir: Path, new_tokens: int, sign_key: Path):
    backend = pick_backend()
    model = Model(cfg, backend, cache_dir)
    print(f"\n== build: optimizing the model once (cache {cache_dir}) ==")
    print(f"first call {model.warm_up():.1f} s")
    regions = model.optimized.regions(model.params, model.buffer)
    for r in regions:
        print(f"  {r.headline()}")
    tokens, per_token = model.decode(new_tokens)
    print(f"tokens {tokens.tolist()}  {per_token * 1e3:.2f} ms/token")
    print(f"\n== build: exporting the cache to {archive} ==")
    cache_cli("export", cache_dir, archive, "--sign", sign_key)
    return tokens


def serve(cfg: Config, archive: Path, cache_dir: Path, new_tokens: int, verify_key: Path):
    """Imports the archive and serves; raises SystemExit if anything had to be searched or
    compiled."""
    backend = pick_backend()
    print(f"\n== serve: importing {archive} into {cache_dir} ==")
    cache_cli("import", cache_dir, archive, "--verify", verify_key)
    before = entry_keys(cache_dir)
    model = Model(cfg, backend, cache_dir)
    print("\n== serve: first call (every region from the cache) ==")
    first = model.warm_up()
    regions = model.optimized.regions(model.params, model.buffer)
    searched = [r for r in regions if r.report and "search cache" not in r.report]
    added = entry_keys(cache_dir) - before
    print(
        f"first call {first:.1f} s: {len(regions)} regions, "
        f"{sum(r.chosen == 'kernel' for r in regions)} as kernels; "
        f"{len(regions) - len(searched)} needed no search, {len(added)} cache entries added"
    )
    if searched or added:
        details = [r.headline() for r in searched] + [
            f"new {k} entry {key}" for k, key in sorted(added)
        ]
        raise SystemExit(
            "serve: the archive did not cover this model at these shapes "
            "(different shapes, versions or machine?); searched or compiled:\n  "
            + "\n  ".join(details)
        )
    tokens, per_token = model.decode(new_tokens)
    print(f"tokens {tokens.tolist()}  {per_token * 1e3:.2f} ms/token, no search and no compile")
    return tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("build", "serve", "demo"))
    parser.add_argument("--archive", type=Path, help="the cache archive (build, serve)")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="mirage_jax cache (default $MIRAGE_JAX_CACHE, else "
        "~/.cache/mirage_jax); use a dedicated one for build, since "
        "export ships all of it",
    )
    parser.add_argument(
        "--build-cache",
        type=Path,
        default=None,
        help="demo: the build side's cache (default: a new temporary one)",
    )
    parser.add_argument(
        "--sign-key", type=Path, help="build: the private key that signs the archive"
    )
    parser.add_argument(
        "--verify-key", type=Path, help="serve: the public key the archive must be signed with"
    )
    parser.add_argument("--small", action="store_true", help="the tiny model (for tests)")
    parser.add_argument("--tokens", type=int, default=None)
    args = parser.parse_args(argv)
    cfg = SMALL if args.small else Config()
    new_tokens = args.tokens if args.tokens is not None else cfg.max_len // 2
    default_cache = Path(
        os.environ.get("MIRAGE_JAX_CACHE") or Path.home() / ".cache" / "mirage_jax"
    )
    if args.mode in ("build", "serve"):
        key = args.sign_key if args.mode == "build" else args.verify_key
        if args.archive is None or key is None:
            which = "--sign-key KEY" if args.mode == "build" else "--verify-key KEY.pub"
            parser.error(f"{args.mode} needs --archive PATH and {which}")
        cache_dir = args.cache_dir or default_cache
        (build if args.mode == "build" else serve)(cfg, args.archive, cache_dir, new_tokens, key)
        return 0
    with tempfile.TemporaryDirectory(prefix="mj_deploy_") as tmp:
        tmp = Path(tmp)
        archive = tmp / "kernels.tar.gz"
        private, public = tmp / "publisher.key", tmp / "publisher.pub"
        cache_cli("keygen", tmp, private, public)
        built = build(cfg, archive, args.build_cache or tmp / "build_cache", new_tokens, private)
        served = serve(cfg, archive, tmp / "serve_cache", new_tokens, public)
    same = bool(np.array_equal(built, served))
    print(f"\nbuild and serve produced the same tokens: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

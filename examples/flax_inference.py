"""A small Llama-style decoder in Flax NNX, decoded greedily with and without mirage_jax.

The model has random weights (no download): token embedding, then per layer RMSNorm,
grouped-query attention with rotary position embeddings and a causal mask, a residual,
RMSNorm, a SwiGLU MLP and a residual; a final RMSNorm and the output projection. The forward
pass is one pure function of (parameters, tokens); it runs under `jax.jit` and under
`@mirage_jax.optimize`, both decode the same prompt for a few tokens, and the script prints
the tokens of each (they must be the same), the regions mirage_jax found and what it chose for
each, and the time per token.

Decoding recomputes the whole fixed-size token buffer each step (the causal mask hides the
positions not written yet), so every step has the same shapes and `optimize` specializes once.

    python examples/flax_inference.py [--small] [--tokens 8] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import mirage_jax as mj


@dataclasses.dataclass(frozen=True)
class Config:
    vocab: int = 512
    dim: int = 256
    layers: int = 2
    heads: int = 8
    kv_heads: int = 2
    hidden: int = 512  # the SwiGLU MLP's inner width
    max_len: int = 32  # the token buffer: prompt + generated tokens
    eps: float = 1e-5
    rope_base: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


SMALL = Config(vocab=128, dim=64, layers=2, heads=4, kv_heads=2, hidden=128, max_len=16)


class RMSNorm(nnx.Module):
    def __init__(self, dim: int, eps: float):
        self.weight = nnx.Param(jnp.ones((dim,), jnp.float32))
        self.eps = eps

    def __call__(self, x):
        ms = jnp.mean(x * x, axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(ms + self.eps) * self.weight[...]


def rotary_tables(cfg: Config):
    """cos and sin of each position's rotation angles, [max_len, head_dim]."""
    half = cfg.head_dim // 2
    freqs = cfg.rope_base ** (-np.arange(half, dtype=np.float64) / half)
    angles = np.arange(cfg.max_len)[:, None] * freqs[None, :]
    angles = np.concatenate([angles, angles], axis=-1)
    return jnp.asarray(np.cos(angles), jnp.float32), jnp.asarray(np.sin(angles), jnp.float32)


def apply_rotary(x, cos, sin):
    """x[b, heads, s, head_dim] rotated by position (the rotate-half form)."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


class Attention(nnx.Module):
    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        self.cfg = cfg
        hd = cfg.head_dim
        self.wq = nnx.Linear(cfg.dim, cfg.heads * hd, use_bias=False, rngs=rngs)
        self.wk = nnx.Linear(cfg.dim, cfg.kv_heads * hd, use_bias=False, rngs=rngs)
        self.wv = nnx.Linear(cfg.dim, cfg.kv_heads * hd, use_bias=False, rngs=rngs)
        self.wo = nnx.Linear(cfg.heads * hd, cfg.dim, use_bias=False, rngs=rngs)

    def __call__(self, x, cos, sin, mask):
        cfg = self.cfg
        b, s, _ = x.shape
        hd = cfg.head_dim

        def heads(y, n):
            return y.reshape(b, s, n, hd).transpose(0, 2, 1, 3)

        q = apply_rotary(heads(self.wq(x), cfg.heads), cos, sin)
        k = apply_rotary(heads(self.wk(x), cfg.kv_heads), cos, sin)
        v = heads(self.wv(x), cfg.kv_heads)
        group = cfg.heads // cfg.kv_heads
        k, v = jnp.repeat(k, group, axis=1), jnp.repeat(v, group, axis=1)
        scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(hd) + mask
        out = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
        return self.wo(out.transpose(0, 2, 1, 3).reshape(b, s, cfg.heads * hd))


class SwiGLU(nnx.Module):
    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        self.gate = nnx.Linear(cfg.dim, cfg.hidden, use_bias=False, rngs=rngs)
        self.up = nnx.Linear(cfg.dim, cfg.hidden, use_bias=False, rngs=rngs)
        self.down = nnx.Linear(cfg.hidden, cfg.dim, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.down(jax.nn.silu(self.gate(x)) * self.up(x))


class Block(nnx.Module):
    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        self.attn_norm = RMSNorm(cfg.dim, cfg.eps)
        self.attn = Attention(cfg, rngs)
        self.mlp_norm = RMSNorm(cfg.dim, cfg.eps)
        self.mlp = SwiGLU(cfg, rngs)

    def __call__(self, x, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nnx.Module):
    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed = nnx.Embed(cfg.vocab, cfg.dim, rngs=rngs)
        self.blocks = nnx.List([Block(cfg, rngs) for _ in range(cfg.layers)])
        self.norm = RMSNorm(cfg.dim, cfg.eps)
        self.lm_head = nnx.Linear(cfg.dim, cfg.vocab, use_bias=False, rngs=rngs)

    def __call__(self, tokens):
        """tokens[b, max_len] -> logits[b, max_len, vocab]."""
        cfg = self.cfg
        cos, sin = rotary_tables(cfg)
        # additive causal mask: position q sees keys 0..q
        mask = jnp.where(jnp.tril(jnp.ones((cfg.max_len, cfg.max_len), bool)), 0.0, -1e9)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


def make_forward(model: Llama):
    """The model as a pure function forward(params, tokens) -> logits, and its params."""
    graphdef, params = nnx.split(model)

    def forward(params, tokens):
        return nnx.merge(graphdef, params)(tokens)

    return forward, params


def greedy_decode(forward, params, prompt, new_tokens: int, max_len: int):
    """Appends `new_tokens` argmax tokens to `prompt` [b, p] in a [b, max_len] buffer.
    Returns (the generated tokens [b, new_tokens], the seconds of each step)."""
    b, p = prompt.shape
    if p + new_tokens > max_len:
        raise ValueError(f"prompt {p} + {new_tokens} new tokens exceed max_len {max_len}")
    buffer = jnp.zeros((b, max_len), jnp.int32).at[:, :p].set(prompt)
    step_times = []
    for t in range(p, p + new_tokens):
        start = time.perf_counter()
        logits = forward(params, buffer)
        nxt = jnp.argmax(logits[:, t - 1], axis=-1).astype(jnp.int32)
        buffer = buffer.at[:, t].set(nxt)
        jax.block_until_ready(buffer)
        step_times.append(time.perf_counter() - start)
    return np.asarray(buffer[:, p : p + new_tokens]), step_times


def build(cfg: Config, seed: int = 0, batch: int = 2):
    model = Llama(cfg, nnx.Rngs(seed))
    forward, params = make_forward(model)
    rng = np.random.default_rng(seed)
    prompt = jnp.asarray(rng.integers(0, cfg.vocab, (batch, cfg.max_len // 2)), jnp.int32)
    return forward, params, prompt


def run(
    cfg: Config, new_tokens: int, cache_dir=None, seed: int = 0, repeats: int = 3, out=print
) -> dict:
    """Decodes with jax.jit and with mj.optimize; returns what it measured."""
    forward, params, prompt = build(cfg, seed)
    jitted = jax.jit(forward)
    optimized = mj.optimize(forward, cache_dir=cache_dir)
    out(
        f"model: {cfg.layers} layers, dim {cfg.dim}, {cfg.heads} query / {cfg.kv_heads} KV "
        f"heads, SwiGLU {cfg.hidden}, vocab {cfg.vocab}, buffer {cfg.max_len}; "
        f"batch {prompt.shape[0]}, prompt {prompt.shape[1]} tokens, {new_tokens} new"
    )

    buffer = (
        jnp.zeros((prompt.shape[0], cfg.max_len), jnp.int32).at[:, : prompt.shape[1]].set(prompt)
    )
    start = time.perf_counter()
    jax.block_until_ready(jitted(params, buffer))
    jit_first = time.perf_counter() - start
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jax.block_until_ready(optimized(params, buffer))
    optimize_first = time.perf_counter() - start
    out(
        f"first call: jax.jit {jit_first:.1f} s, mj.optimize {optimize_first:.1f} s "
        f"(trace, partition, search or cache, compile, time, check)"
    )
    regions = optimized.regions(params, buffer)
    kernels = sum(r.chosen == "kernel" for r in regions)
    out(
        f"\n== what mirage_jax did with each region: {len(regions)} regions, {kernels} run as "
        f"generated kernels =="
    )
    for r in regions:
        out(f"  {r.headline()}\n      primitives: {' '.join(r.primitives)}")
    out("  (optimized.explain(params, tokens) prints each chosen μGraph and its timings)")
    for w in caught:
        if "region at" not in str(w.message):
            out(f"warning: {w.message}")

    want_logits = jitted(params, buffer)
    got_logits = optimized(params, buffer)
    scale = float(jnp.max(jnp.abs(want_logits)))
    logit_err = float(jnp.max(jnp.abs(got_logits - want_logits))) / scale

    decoders = {"jax.jit": jitted, "mj.optimize": optimized}
    tokens = dict.fromkeys(decoders)
    step_times = {name: [] for name in decoders}
    for i in range(repeats):  # the two alternate, each decoding the same prompt
        for name in list(decoders) if i % 2 == 0 else list(decoders)[::-1]:
            tokens[name], times = greedy_decode(
                decoders[name], params, prompt, new_tokens, cfg.max_len
            )
            step_times[name].extend(times)
    results = {name: (tokens[name], statistics.median(step_times[name])) for name in decoders}
    same = bool(np.array_equal(results["jax.jit"][0], results["mj.optimize"][0]))
    out("\n== greedy decoding ==")
    for name, (generated, per_token) in results.items():
        out(f"{name:<12} tokens {generated.tolist()}  {per_token * 1e3:.2f} ms/token")
    out(f"same tokens: {'yes' if same else 'NO'}; logits normwise difference {logit_err:.1e}")
    jit_t, mj_t = results["jax.jit"][1], results["mj.optimize"][1]
    out(
        f"time per token: jax.jit {jit_t * 1e3:.2f} ms, mj.optimize {mj_t * 1e3:.2f} ms "
        f"({jit_t / mj_t:.2f}x)"
    )
    return dict(
        same_tokens=same,
        tokens_jit=results["jax.jit"][0],
        tokens_optimized=results["mj.optimize"][0],
        logit_err=logit_err,
        ms_per_token_jit=jit_t * 1e3,
        ms_per_token_optimized=mj_t * 1e3,
        regions=len(regions),
        kernel_regions=kernels,
        first_call_s=optimize_first,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="a tiny model (for tests)")
    parser.add_argument(
        "--tokens", type=int, default=None, help="tokens to generate (default: half the buffer)"
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="mirage_jax's cache (default $MIRAGE_JAX_CACHE or ~/.cache)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cfg = SMALL if args.small else Config()
    new_tokens = args.tokens if args.tokens is not None else cfg.max_len // 2
    result = run(cfg, new_tokens, cache_dir=args.cache_dir, seed=args.seed)
    return 0 if result["same_tokens"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""A Llama-style decoder in Flax nnx, written as its users write one.

RMSNorm with a learned scale (computed in float32), grouped-query attention on `[B, T, N, H]`
layouts with the query heads reshaped into `[B, T, K, G, H]` groups, rotary embeddings by
slices and concatenation, an additive float32 mask (`where(mask, 0, finfo.min)`) from the
causal and padding masks, softmax in float32, a SwiGLU MLP, residuals and an untied LM head.

prefill: `(state, tokens, positions, attention_mask) -> (logits [B, T, V], kv)`, kv per layer
    `{"k", "v": [B, T, K, H]}`.
decode_b<N>: `(state, cache, tokens [N, 1], positions [N, 1], index, key_mask [N, L]) ->
    (logits [N, V], cache)`: the step writes its key and value into the preallocated cache at
    slot `index` (`lax.dynamic_update_slice`) and attends over the cache, unwritten slots
    (beyond `index`) and padding masked.
generate_b4: `(state, cache, tokens, positions, index, key_mask) -> (sampled [4, steps], cache)`:
    the decode step in a greedy sampling loop under `lax.while_loop` (common.GENERATE_STEPS).

The module is used as nnx users do under a transform: `nnx.split` once, `nnx.merge` inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from . import common


@dataclass(frozen=True)
class Config:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    batch: int  # prefill
    seq: int  # prefill
    cache_len: int  # decode: the preallocated cache
    cache_index: int  # decode: the slot the step writes (the prompt filled the ones before)
    decode_batches: tuple = (1, 4, 8)
    rope_base: float = 10000.0
    eps: float = 1e-6


CONFIGS = {
    "tiny": Config(
        vocab=256,
        hidden=64,
        layers=2,
        heads=4,
        kv_heads=2,
        head_dim=16,
        ffn=128,
        batch=2,
        seq=16,
        cache_len=32,
        cache_index=16,
        decode_batches=(4,),
    ),
    "small": Config(
        vocab=8192,
        hidden=1024,
        layers=2,
        heads=16,
        kv_heads=4,
        head_dim=64,
        ffn=2816,
        batch=2,
        seq=128,
        cache_len=256,
        cache_index=128,
    ),
}


class RMSNorm(nnx.Module):
    def __init__(self, dim: int, *, eps: float, dtype, rngs: nnx.Rngs):
        # random around 1 (trained scales are not all ones)
        self.scale = nnx.Param(1.0 + 0.1 * jax.random.normal(rngs.params(), (dim,), dtype))
        self.eps = eps

    def __call__(self, x):
        h = x.astype(jnp.float32)
        var = jnp.mean(h * h, axis=-1, keepdims=True)
        h = h * jax.lax.rsqrt(var + self.eps)
        return h.astype(x.dtype) * self.scale[...]


def apply_rope(x, positions, base: float):
    """x [B, T, N, H], positions [B, T]: rotate the two halves of each head."""
    h = x.shape[-1]
    inv_freq = 1.0 / (base ** (jnp.arange(0, h, 2, dtype=jnp.float32) / h))
    angles = positions[..., None].astype(jnp.float32) * inv_freq  # [B, T, H/2]
    angles = jnp.concatenate([angles, angles], axis=-1)[:, :, None, :]
    x1, x2 = x[..., : h // 2], x[..., h // 2 :]
    rotated = jnp.concatenate([-x2, x1], axis=-1)
    out = x.astype(jnp.float32) * jnp.cos(angles) + rotated.astype(jnp.float32) * jnp.sin(angles)
    return out.astype(x.dtype)


class Attention(nnx.Module):
    def __init__(self, cfg: Config, dtype, rngs: nnx.Rngs):
        linear = partial(nnx.Linear, use_bias=False, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.q_proj = linear(cfg.hidden, cfg.heads * cfg.head_dim)
        self.k_proj = linear(cfg.hidden, cfg.kv_heads * cfg.head_dim)
        self.v_proj = linear(cfg.hidden, cfg.kv_heads * cfg.head_dim)
        self.o_proj = linear(cfg.heads * cfg.head_dim, cfg.hidden)
        self.cfg = cfg

    def __call__(self, x, positions, bias, cache=None, index=None):
        cfg = self.cfg
        b, t, _ = x.shape
        q = self.q_proj(x).reshape(b, t, cfg.heads, cfg.head_dim)
        k = self.k_proj(x).reshape(b, t, cfg.kv_heads, cfg.head_dim)
        v = self.v_proj(x).reshape(b, t, cfg.kv_heads, cfg.head_dim)
        q = apply_rope(q, positions, cfg.rope_base)
        k = apply_rope(k, positions, cfg.rope_base)
        if cache is not None:
            k = jax.lax.dynamic_update_slice(cache["k"], k, (0, index, 0, 0))
            v = jax.lax.dynamic_update_slice(cache["v"], v, (0, index, 0, 0))
        groups = cfg.heads // cfg.kv_heads
        q = q.reshape(b, t, cfg.kv_heads, groups, cfg.head_dim)
        scores = jnp.einsum("btkgh,bskh->bkgts", q, k) * (cfg.head_dim**-0.5)
        scores = scores.astype(jnp.float32) + bias[:, :, None]  # bias [B, 1, T, S]
        probs = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
        out = jnp.einsum("bkgts,bskh->btkgh", probs, v)
        out = out.reshape(b, t, cfg.heads * cfg.head_dim)
        return self.o_proj(out), {"k": k, "v": v}


class MLP(nnx.Module):
    def __init__(self, cfg: Config, dtype, rngs: nnx.Rngs):
        linear = partial(nnx.Linear, use_bias=False, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.gate_proj = linear(cfg.hidden, cfg.ffn)
        self.up_proj = linear(cfg.hidden, cfg.ffn)
        self.down_proj = linear(cfg.ffn, cfg.hidden)

    def __call__(self, x):
        return self.down_proj(nnx.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nnx.Module):
    def __init__(self, cfg: Config, dtype, rngs: nnx.Rngs):
        self.input_norm = RMSNorm(cfg.hidden, eps=cfg.eps, dtype=dtype, rngs=rngs)
        self.attn = Attention(cfg, dtype, rngs)
        self.post_attn_norm = RMSNorm(cfg.hidden, eps=cfg.eps, dtype=dtype, rngs=rngs)
        self.mlp = MLP(cfg, dtype, rngs)

    def __call__(self, x, positions, bias, cache=None, index=None):
        h, kv = self.attn(self.input_norm(x), positions, bias, cache, index)
        x = x + h
        x = x + self.mlp(self.post_attn_norm(x))
        return x, kv


class Llama(nnx.Module):
    def __init__(self, cfg: Config, dtype, rngs: nnx.Rngs):
        self.embed = nnx.Embed(cfg.vocab, cfg.hidden, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.layers = nnx.List([DecoderLayer(cfg, dtype, rngs) for _ in range(cfg.layers)])
        self.norm = RMSNorm(cfg.hidden, eps=cfg.eps, dtype=dtype, rngs=rngs)
        self.lm_head = nnx.Linear(
            cfg.hidden, cfg.vocab, use_bias=False, dtype=dtype, param_dtype=dtype, rngs=rngs
        )

    def __call__(self, tokens, positions, bias, caches=None, index=None):
        x = self.embed(tokens)
        new_caches = []
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, positions, bias, None if caches is None else caches[i], index)
            new_caches.append(kv)
        return self.lm_head(self.norm(x)), new_caches


def mask_bias(mask):
    """The additive float32 bias of a boolean mask: 0 where attended, finfo.min where not."""
    return jnp.where(mask, 0.0, jnp.finfo(jnp.float32).min)


def modes(cfg: Config) -> tuple:
    return common.decoder_modes(cfg.decode_batches)


def build(mode: str, cfg: Config, dtype):
    """(fn, params, example inputs) of `mode`, with random weights from a fixed seed."""
    model = Llama(cfg, dtype, nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    if mode == "prefill":

        def prefill(state, tokens, positions, attention_mask):
            model = nnx.merge(graphdef, state)
            t = tokens.shape[1]
            causal = jnp.arange(t)[:, None] >= jnp.arange(t)[None, :]
            mask = (
                causal[None, None]
                & attention_mask[:, None, :, None]
                & attention_mask[:, None, None, :]
            )
            return model(tokens, positions, mask_bias(mask))

        return prefill, state, _prefill_inputs(cfg, padded=False)

    def decode_step(state, cache, tokens, positions, index, key_mask):
        model = nnx.merge(graphdef, state)
        written = jnp.arange(key_mask.shape[1]) <= index
        mask = (key_mask & written[None])[:, None, None, :]
        logits, cache = model(tokens, positions, mask_bias(mask), cache, index)
        return logits[:, -1], cache

    if mode.startswith("generate"):

        def generate(state, cache, tokens, positions, index, key_mask):
            """Greedy sampling under while_loop, as samplers with a stop condition loop:
            (the sampled tokens [B, steps], the cache)."""

            def running(carry):
                return carry[0] < common.GENERATE_STEPS

            def step(carry):
                i, cache, tokens, positions, index, key_mask, sampled = carry
                logits, cache = decode_step(state, cache, tokens, positions, index, key_mask)
                tokens = jnp.argmax(logits, axis=-1).astype(tokens.dtype)[:, None]
                key_mask = key_mask.at[:, index + 1].set(True)
                sampled = sampled.at[:, i].set(tokens[:, 0])
                return i + 1, cache, tokens, positions + 1, index + 1, key_mask, sampled

            sampled = jnp.zeros((tokens.shape[0], common.GENERATE_STEPS), tokens.dtype)
            carry = (jnp.int32(0), cache, tokens, positions, index, key_mask, sampled)
            _, cache, *_, sampled = jax.lax.while_loop(running, step, carry)
            return sampled, cache

        return generate, state, _decode_inputs(cfg, mode, dtype, padded=False)
    return decode_step, state, _decode_inputs(cfg, mode, dtype, padded=False)


def padded_inputs(mode: str, cfg: Config, dtype) -> tuple:
    """Example inputs of `mode` (same shapes) for a padded batch (common.prompt_mask,
    common.cache_mask)."""
    if mode == "prefill":
        return _prefill_inputs(cfg, padded=True)
    return _decode_inputs(cfg, mode, dtype, padded=True)


def _prefill_inputs(cfg: Config, padded: bool) -> tuple:
    rng = np.random.default_rng(1)
    shape = (cfg.batch, cfg.seq)
    mask = common.prompt_mask(*shape, seed=2) if padded else np.ones(shape, bool)
    return (
        jnp.asarray(common.tokens(rng, shape, cfg.vocab, mask)),
        jnp.asarray(common.positions_of(mask)),
        jnp.asarray(mask),
    )


def _decode_inputs(cfg: Config, mode: str, dtype, padded: bool) -> tuple:
    batch = common.decode_batch(mode)
    rng = np.random.default_rng(3)
    shape = (batch, cfg.cache_len, cfg.kv_heads, cfg.head_dim)
    filled = (np.arange(cfg.cache_len) < cfg.cache_index)[None, :, None, None]
    cache = [
        {
            name: jnp.asarray(np.where(filled, rng.standard_normal(shape), 0.0), dtype)
            for name in ("k", "v")
        }
        for _ in range(cfg.layers)
    ]
    if padded:
        key_mask = common.cache_mask(batch, cfg.cache_len, cfg.cache_index, seed=4)
    else:
        key_mask = np.zeros((batch, cfg.cache_len), bool)
        key_mask[:, : cfg.cache_index + 1] = True
    positions = common.decode_positions(key_mask, cfg.cache_index)
    return (
        cache,
        jnp.asarray(common.tokens(rng, (batch, 1), cfg.vocab)),
        jnp.asarray(positions),
        jnp.asarray(cfg.cache_index, jnp.int32),
        jnp.asarray(key_mask),
    )

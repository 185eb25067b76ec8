"""A GPT-2-style decoder in Flax linen, written as its users write one.

`nn.Dense` with biases (one fused q/k/v projection split with `jnp.split`), `nn.LayerNorm`
as Flax computes it, multi-head attention on `[B, T, N, H]` layouts with a causal mask from
`jnp.tril` and `jnp.where(mask, scores, finfo.min)`, GELU (tanh form, `nn.gelu`'s default),
pre-norm residual blocks, learned position embeddings and an LM head tied to the token
embedding (`nn.Embed.attend`).

Decoding uses the Flax cache idiom: with `decode=True` each attention layer keeps
`cached_key`, `cached_value` ([B, L, N, H]) and `cache_index` in the "cache" collection,
writes the step's key and value with `lax.dynamic_update_slice` and masks the slots not yet
written; the step runs as `apply(..., mutable=["cache"])`.

prefill: `(params, tokens, positions, attention_mask) -> logits [B, T, V]`.
decode_b<N>: `(params, cache, tokens [N, 1], positions [N, 1], key_mask [N, L]) ->
    (logits [N, V], cache)`.
generate_b4: `(params, cache, tokens, positions, key_mask) -> (sampled [4, steps], cache)`: the
    decode step in a greedy sampling loop under `lax.fori_loop` (common.GENERATE_STEPS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from . import common


@dataclass(frozen=True)
class Config:
    vocab: int
    hidden: int
    layers: int
    heads: int
    max_positions: int
    batch: int  # prefill
    seq: int  # prefill
    cache_len: int
    cache_index: int
    decode_batches: tuple = (1, 4, 8)
    eps: float = 1e-5


CONFIGS = {
    "tiny": Config(
        vocab=256,
        hidden=64,
        layers=2,
        heads=4,
        max_positions=64,
        batch=2,
        seq=16,
        cache_len=32,
        cache_index=16,
        decode_batches=(4,),
    ),
    "small": Config(
        vocab=8192,
        hidden=768,
        layers=2,
        heads=12,
        max_positions=512,
        batch=2,
        seq=128,
        cache_len=256,
        cache_index=128,
    ),
}


def near_one(key, shape, dtype=jnp.float32):
    """LayerNorm scales as trained models have them: around 1, not all ones."""
    return 1.0 + 0.1 * jax.random.normal(key, shape, dtype)


bias_init = nn.initializers.normal(0.02)


class CausalSelfAttention(nn.Module):
    cfg: Config
    dtype: Any
    decode: bool = False

    @nn.compact
    def __call__(self, x, mask):
        cfg = self.cfg
        b, t, d = x.shape
        n, h = cfg.heads, d // cfg.heads
        dense = dict(dtype=self.dtype, param_dtype=self.dtype, bias_init=bias_init)
        qkv = nn.Dense(3 * d, name="c_attn", **dense)(x)
        q, k, v = jnp.split(qkv, 3, axis=-1)
        q, k, v = (a.reshape(b, t, n, h) for a in (q, k, v))
        if self.decode:
            initialized = self.has_variable("cache", "cached_key")
            cached_key = self.variable("cache", "cached_key", jnp.zeros, k.shape, k.dtype)
            cached_value = self.variable("cache", "cached_value", jnp.zeros, v.shape, v.dtype)
            cache_index = self.variable(
                "cache", "cache_index", lambda: jnp.array(0, dtype=jnp.int32)
            )
            if initialized:
                index = cache_index.value
                k = jax.lax.dynamic_update_slice(cached_key.value, k, (0, index, 0, 0))
                v = jax.lax.dynamic_update_slice(cached_value.value, v, (0, index, 0, 0))
                cached_key.value, cached_value.value = k, v
                cache_index.value = index + t
                written = jnp.arange(k.shape[1]) < index + t
                mask = mask & written[None, None, None, :]
        att = jnp.einsum("bqnh,bknh->bnqk", q, k) / jnp.sqrt(h).astype(self.dtype)
        att = jnp.where(mask, att, jnp.finfo(att.dtype).min)
        att = jax.nn.softmax(att, axis=-1)
        y = jnp.einsum("bnqk,bknh->bqnh", att, v).reshape(b, t, d)
        return nn.Dense(d, name="c_proj", **dense)(y)


class MLP(nn.Module):
    dtype: Any

    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        dense = dict(dtype=self.dtype, param_dtype=self.dtype, bias_init=bias_init)
        h = nn.gelu(nn.Dense(4 * d, name="c_fc", **dense)(x))
        return nn.Dense(d, name="c_proj", **dense)(h)


class Block(nn.Module):
    cfg: Config
    dtype: Any
    decode: bool = False

    @nn.compact
    def __call__(self, x, mask):
        norm = dict(
            epsilon=self.cfg.eps,
            dtype=self.dtype,
            param_dtype=self.dtype,
            scale_init=near_one,
            bias_init=bias_init,
        )
        x = x + CausalSelfAttention(self.cfg, self.dtype, self.decode, name="attn")(
            nn.LayerNorm(name="ln_1", **norm)(x), mask
        )
        return x + MLP(self.dtype, name="mlp")(nn.LayerNorm(name="ln_2", **norm)(x))


class GPT2(nn.Module):
    cfg: Config
    dtype: Any = jnp.float32
    decode: bool = False

    @nn.compact
    def __call__(self, tokens, positions, attention_mask):
        cfg = self.cfg
        embed = dict(
            dtype=self.dtype, param_dtype=self.dtype, embedding_init=nn.initializers.normal(0.02)
        )
        wte = nn.Embed(cfg.vocab, cfg.hidden, name="wte", **embed)
        wpe = nn.Embed(cfg.max_positions, cfg.hidden, name="wpe", **embed)
        x = wte(tokens) + wpe(positions)
        if self.decode:
            # attention_mask [B, L] marks the cache slots holding tokens (not padding)
            mask = attention_mask[:, None, None, :]
        else:
            t = tokens.shape[1]
            causal = jnp.tril(jnp.ones((t, t), dtype=bool))
            mask = (
                causal[None, None]
                & attention_mask[:, None, :, None]
                & attention_mask[:, None, None, :]
            )
        for i in range(cfg.layers):
            x = Block(cfg, self.dtype, self.decode, name=f"h_{i}")(x, mask)
        x = nn.LayerNorm(
            epsilon=cfg.eps,
            dtype=self.dtype,
            param_dtype=self.dtype,
            scale_init=near_one,
            bias_init=bias_init,
            name="ln_f",
        )(x)
        return wte.attend(x)


def modes(cfg: Config) -> tuple:
    return common.decoder_modes(cfg.decode_batches)


def _params(cfg: Config, dtype):
    tokens = jnp.zeros((1, cfg.seq), jnp.int32)
    return GPT2(cfg, dtype).init(jax.random.key(0), tokens, tokens, jnp.ones((1, cfg.seq), bool))


def build(mode: str, cfg: Config, dtype):
    """(fn, params, example inputs) of `mode`, with random weights from a fixed seed."""
    params = _params(cfg, dtype)
    if mode == "prefill":
        model = GPT2(cfg, dtype)

        def prefill(params, tokens, positions, attention_mask):
            return model.apply(params, tokens, positions, attention_mask)

        return prefill, params, _prefill_inputs(cfg, padded=False)

    decoder = GPT2(cfg, dtype, decode=True)

    def decode_step(params, cache, tokens, positions, key_mask):
        logits, mutated = decoder.apply(
            {**params, "cache": cache}, tokens, positions, key_mask, mutable=["cache"]
        )
        return logits[:, -1], mutated["cache"]

    if mode.startswith("generate"):

        def generate(params, cache, tokens, positions, key_mask):
            """Greedy sampling under fori_loop: (the sampled tokens [B, steps], the cache)."""

            def step(i, carry):
                cache, tokens, positions, key_mask, sampled = carry
                logits, cache = decode_step(params, cache, tokens, positions, key_mask)
                tokens = jnp.argmax(logits, axis=-1).astype(tokens.dtype)[:, None]
                # the next token sits in the slot after this one, and attends to it
                key_mask = key_mask.at[:, cfg.cache_index + 1 + i].set(True)
                sampled = sampled.at[:, i].set(tokens[:, 0])
                return cache, tokens, positions + 1, key_mask, sampled

            sampled = jnp.zeros((tokens.shape[0], common.GENERATE_STEPS), tokens.dtype)
            carry = (cache, tokens, positions, key_mask, sampled)
            cache, *_, sampled = jax.lax.fori_loop(0, common.GENERATE_STEPS, step, carry)
            return sampled, cache

        return generate, params, _decode_inputs(cfg, mode, dtype, padded=False)
    return decode_step, params, _decode_inputs(cfg, mode, dtype, padded=False)


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
    decoder = GPT2(cfg, dtype, decode=True)
    full = jnp.zeros((batch, cfg.cache_len), jnp.int32)
    # the Flax idiom: initializing at the full length shapes the cache
    empty = jax.eval_shape(
        lambda: decoder.init(jax.random.key(0), full, full, jnp.ones(full.shape, bool))
    )["cache"]
    rng = np.random.default_rng(3)
    filled = (np.arange(cfg.cache_len) < cfg.cache_index)[None, :, None, None]

    def prefilled(path, leaf):
        if jax.tree_util.keystr(path).endswith("['cache_index']"):
            return jnp.asarray(cfg.cache_index, jnp.int32)
        return jnp.asarray(np.where(filled, rng.standard_normal(leaf.shape), 0.0), dtype)

    cache = jax.tree_util.tree_map_with_path(prefilled, empty)
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
        jnp.asarray(key_mask),
    )

"""A BERT-like encoder with padding masks in Flax linen, written as its users write one.

Word, position and token-type embeddings; post-norm blocks with a LayerNorm written out by
hand (`jnp.mean`, `jnp.var`, `(x - mean) / sqrt(var + eps)`, in float32 as ports do),
`nn.Dense` with biases, multi-head attention on `[B, T, N, H]` layouts under the classic
additive mask `(1 - mask) * -10000` built from the tokenizer's 0/1 attention-mask array
(query and key: a padding row attends to nothing), GELU in its exact erf form. Outputs the
sequence, BERT's tanh pooler on [CLS], and sentence-embedding max pooling, which sets padding
to a big negative with `jnp.where(mask, x, -1e9)` before the max.

encode: `(params, input_ids, token_type_ids, attention_mask) -> (sequence [B, T, D],
    pooled [B, D], max_pooled [B, D])`.
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
    ffn: int
    max_positions: int
    batch: int
    seq: int
    type_vocab: int = 2
    eps: float = 1e-12


CONFIGS = {
    "tiny": Config(
        vocab=256, hidden=64, layers=2, heads=4, ffn=128, max_positions=64, batch=4, seq=16
    ),
    "small": Config(
        vocab=8192, hidden=512, layers=4, heads=8, ffn=2048, max_positions=512, batch=4, seq=128
    ),
}

weight_init = nn.initializers.normal(0.02)


class LayerNorm(nn.Module):
    eps: float
    param_dtype: Any

    @nn.compact
    def __call__(self, x):
        d = x.shape[-1]
        gamma = self.param(
            "gamma", lambda k, s, t: 1.0 + 0.1 * jax.random.normal(k, s, t), (d,), self.param_dtype
        )
        beta = self.param("beta", weight_init, (d,), self.param_dtype)
        h = x.astype(jnp.float32)
        mean = jnp.mean(h, axis=-1, keepdims=True)
        var = jnp.var(h, axis=-1, keepdims=True)
        h = (h - mean) / jnp.sqrt(var + self.eps)
        return (h * gamma + beta).astype(x.dtype)


class SelfAttention(nn.Module):
    cfg: Config
    dtype: Any

    @nn.compact
    def __call__(self, x, bias):
        cfg = self.cfg
        b, t, d = x.shape
        n, h = cfg.heads, d // cfg.heads

        def dense(name, features=d):
            return nn.Dense(
                features,
                dtype=self.dtype,
                param_dtype=self.dtype,
                kernel_init=weight_init,
                bias_init=weight_init,
                name=name,
            )

        q = dense("query")(x).reshape(b, t, n, h)
        k = dense("key")(x).reshape(b, t, n, h)
        v = dense("value")(x).reshape(b, t, n, h)
        scores = jnp.einsum("bqnh,bknh->bnqk", q, k) * h**-0.5
        probs = jax.nn.softmax(scores + bias, axis=-1)
        context = jnp.einsum("bnqk,bknh->bqnh", probs, v).reshape(b, t, d)
        return dense("output")(context)


class Layer(nn.Module):
    cfg: Config
    dtype: Any

    @nn.compact
    def __call__(self, x, bias):
        cfg = self.cfg

        def dense(features, name):
            return nn.Dense(
                features,
                dtype=self.dtype,
                param_dtype=self.dtype,
                kernel_init=weight_init,
                bias_init=weight_init,
                name=name,
            )

        x = LayerNorm(cfg.eps, self.dtype, name="attention_norm")(
            x + SelfAttention(cfg, self.dtype, name="attention")(x, bias)
        )
        h = nn.gelu(dense(cfg.ffn, "intermediate")(x), approximate=False)
        return LayerNorm(cfg.eps, self.dtype, name="output_norm")(
            x + dense(cfg.hidden, "output")(h)
        )


class Bert(nn.Module):
    cfg: Config
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, input_ids, token_type_ids, attention_mask):
        cfg = self.cfg
        embed = dict(dtype=self.dtype, param_dtype=self.dtype, embedding_init=weight_init)
        positions = jnp.arange(input_ids.shape[1])[None, :]
        x = (
            nn.Embed(cfg.vocab, cfg.hidden, name="word_embeddings", **embed)(input_ids)
            + nn.Embed(cfg.max_positions, cfg.hidden, name="position_embeddings", **embed)(
                positions
            )
            + nn.Embed(cfg.type_vocab, cfg.hidden, name="token_type_embeddings", **embed)(
                token_type_ids
            )
        )
        x = LayerNorm(cfg.eps, self.dtype, name="embeddings_norm")(x)
        pair = attention_mask[:, None, :, None] * attention_mask[:, None, None, :]
        bias = ((1.0 - pair.astype(self.dtype)) * -10000.0).astype(self.dtype)
        for i in range(cfg.layers):
            x = Layer(cfg, self.dtype, name=f"layer_{i}")(x, bias)
        pooled = jnp.tanh(
            nn.Dense(
                cfg.hidden,
                dtype=self.dtype,
                param_dtype=self.dtype,
                kernel_init=weight_init,
                name="pooler",
            )(x[:, 0])
        )
        keep = attention_mask[:, :, None].astype(bool)
        max_pooled = jnp.max(jnp.where(keep, x, -1e9), axis=1)
        return x, pooled, max_pooled


def modes(cfg: Config) -> tuple:
    return ("encode",)


def build(mode: str, cfg: Config, dtype):
    """(fn, params, example inputs) of `mode`, with random weights from a fixed seed."""
    if mode != "encode":
        raise ValueError(f"bert: unknown mode {mode!r}; the encoder has only 'encode'")
    model = Bert(cfg, dtype)
    ids = jnp.zeros((1, cfg.seq), jnp.int32)
    params = model.init(jax.random.key(0), ids, ids, jnp.ones((1, cfg.seq), jnp.int32))

    def encode(params, input_ids, token_type_ids, attention_mask):
        return model.apply(params, input_ids, token_type_ids, attention_mask)

    return encode, params, _inputs(cfg, padded=False)


def padded_inputs(mode: str, cfg: Config, dtype) -> tuple:
    """Example inputs (same shapes) for a padded batch (common.prompt_mask)."""
    if mode != "encode":
        raise ValueError(f"bert: unknown mode {mode!r}; the encoder has only 'encode'")
    return _inputs(cfg, padded=True)


def _inputs(cfg: Config, padded: bool) -> tuple:
    rng = np.random.default_rng(1)
    shape = (cfg.batch, cfg.seq)
    mask = common.prompt_mask(*shape, seed=2) if padded else np.ones(shape, bool)
    ids = common.tokens(rng, shape, cfg.vocab, mask)
    # two segments, as sentence pairs have (padding is segment 0)
    types = ((np.arange(cfg.seq) >= cfg.seq // 2)[None, :] & mask).astype(np.int32)
    return jnp.asarray(ids), jnp.asarray(types), jnp.asarray(mask.astype(np.int32))

"""A ViT-style image encoder in Equinox, written as its users write one.

Equinox layers act on one example: a strided `eqx.nn.Conv2d` patch embedding, a class token
and learned position embeddings, pre-norm blocks of `eqx.nn.LayerNorm` and
`eqx.nn.MultiheadAttention` (with biases) and an MLP of `eqx.nn.Linear` with GELU (tanh
form, jax.nn.gelu's default), each per-token layer under `jax.vmap`, and a linear
classification head on the class token. The batch is one more `jax.vmap`; the model's
arrays are split from its static parts with `eqx.partition` and put back with
`eqx.combine` inside the function, as under `jax.jit`.

encode: `(params, images [B, C, H, W]) -> logits [B, classes]`.
"""

from __future__ import annotations

from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Config:
    image: int
    patch: int
    channels: int
    hidden: int
    layers: int
    heads: int
    mlp: int
    classes: int
    batch: int
    eps: float = 1e-6


CONFIGS = {
    "tiny": Config(
        image=32, patch=8, channels=3, hidden=64, layers=2, heads=4, mlp=128, classes=16, batch=2
    ),
    "small": Config(
        image=224,
        patch=16,
        channels=3,
        hidden=512,
        layers=4,
        heads=8,
        mlp=2048,
        classes=1000,
        batch=2,
    ),
}


def trained_like_norm(hidden: int, eps: float, dtype, key) -> eqx.nn.LayerNorm:
    """A LayerNorm whose weight and bias are not the 1 and 0 it starts from."""
    norm = eqx.nn.LayerNorm(hidden, eps=eps, dtype=dtype)
    kw, kb = jax.random.split(key)
    return eqx.tree_at(
        lambda m: (m.weight, m.bias),
        norm,
        (
            1.0 + 0.1 * jax.random.normal(kw, (hidden,), dtype),
            0.02 * jax.random.normal(kb, (hidden,), dtype),
        ),
    )


class Block(eqx.Module):
    norm1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    norm2: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear

    def __init__(self, cfg: Config, dtype, key):
        k1, k2, k3, k4, k5 = jax.random.split(key, 5)
        self.norm1 = trained_like_norm(cfg.hidden, cfg.eps, dtype, k1)
        self.attn = eqx.nn.MultiheadAttention(
            cfg.heads,
            cfg.hidden,
            use_query_bias=True,
            use_key_bias=True,
            use_value_bias=True,
            use_output_bias=True,
            dtype=dtype,
            key=k2,
        )
        self.norm2 = trained_like_norm(cfg.hidden, cfg.eps, dtype, k3)
        self.fc1 = eqx.nn.Linear(cfg.hidden, cfg.mlp, dtype=dtype, key=k4)
        self.fc2 = eqx.nn.Linear(cfg.mlp, cfg.hidden, dtype=dtype, key=k5)

    def __call__(self, x):  # x [tokens, hidden]
        h = jax.vmap(self.norm1)(x)
        x = x + self.attn(h, h, h)
        h = jax.vmap(self.fc1)(jax.vmap(self.norm2)(x))
        return x + jax.vmap(self.fc2)(jax.nn.gelu(h))


class ViT(eqx.Module):
    patch_embed: eqx.nn.Conv2d
    cls_token: jax.Array
    pos_embed: jax.Array
    blocks: list
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear

    def __init__(self, cfg: Config, dtype, key):
        keys = jax.random.split(key, cfg.layers + 5)
        self.patch_embed = eqx.nn.Conv2d(
            cfg.channels, cfg.hidden, cfg.patch, stride=cfg.patch, dtype=dtype, key=keys[0]
        )
        tokens = (cfg.image // cfg.patch) ** 2 + 1
        self.cls_token = 0.02 * jax.random.normal(keys[1], (1, cfg.hidden), dtype)
        self.pos_embed = 0.02 * jax.random.normal(keys[2], (tokens, cfg.hidden), dtype)
        self.blocks = [Block(cfg, dtype, k) for k in keys[5:]]
        self.norm = trained_like_norm(cfg.hidden, cfg.eps, dtype, keys[3])
        self.head = eqx.nn.Linear(cfg.hidden, cfg.classes, dtype=dtype, key=keys[4])

    def __call__(self, image):  # image [C, H, W]
        x = self.patch_embed(image)  # [hidden, h, w]
        x = x.reshape(x.shape[0], -1).T  # [patches, hidden]
        x = jnp.concatenate([self.cls_token, x], axis=0) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[0]))


def modes(cfg: Config) -> tuple:
    return ("encode",)


def build(mode: str, cfg: Config, dtype):
    """(fn, params, example inputs) of `mode`, with random weights from a fixed seed."""
    if mode != "encode":
        raise ValueError(f"vit: unknown mode {mode!r}; the encoder has only 'encode'")
    params, static = eqx.partition(ViT(cfg, dtype, jax.random.key(0)), eqx.is_array)

    def encode(params, images):
        model = eqx.combine(params, static)
        return jax.vmap(model)(images)

    return encode, params, _inputs(cfg, dtype, padded=False)


def padded_inputs(mode: str, cfg: Config, dtype) -> tuple:
    """A padded batch (same shape): the last half of the images are blank, as a loader pads
    its final, partial batch."""
    if mode != "encode":
        raise ValueError(f"vit: unknown mode {mode!r}; the encoder has only 'encode'")
    return _inputs(cfg, dtype, padded=True)


def _inputs(cfg: Config, dtype, padded: bool) -> tuple:
    rng = np.random.default_rng(1)
    images = rng.standard_normal((cfg.batch, cfg.channels, cfg.image, cfg.image))
    if padded:
        images[(cfg.batch + 1) // 2 :] = 0.0
    return (jnp.asarray(images, dtype),)

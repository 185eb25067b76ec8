"""What every zoo model shares: the `Case` the harness and the tests run, and the padded
batches that batched-prompt pipelines make.

A padded batch has the shapes of the normal one. Rows are padded on the left (generation
pipelines align the last prompt token) or on the right (encoders, and decoders whose prompts
were prefilled right-padded), and a padding query row is masked against every key: its
softmax row is all "big negative", which is where an unstabilized softmax divides 0 by 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

DTYPES = {"f32": jnp.float32, "bf16": jnp.bfloat16}


@dataclass(frozen=True)
class Case:
    """One model in one mode, ready to run: `fn(params, *inputs)`.

    `padded` has the same shapes and dtypes as `inputs` (one specialization serves both)."""

    model: str  # "llama"
    mode: str  # "prefill", "decode_b4", "encode"
    size: str  # "tiny" or "small"
    dtype: str  # "f32" or "bf16"
    fn: Callable
    params: object
    inputs: tuple
    padded: tuple
    description: str

    @property
    def name(self) -> str:
        return f"{self.model}_{self.mode}"

    def args(self, padded: bool = False) -> tuple:
        return (self.params, *(self.padded if padded else self.inputs))


# Tokens a "generate_b<N>" case samples: its decode step run in the model's own sampling
# loop (fori_loop or while_loop), greedily, from the decode step's cache and prompt.
GENERATE_STEPS = 8
# The batch of the decoders' generate mode (one: the loop costs GENERATE_STEPS steps of time).
GENERATE_BATCH = 4


def decode_batch(mode: str) -> int:
    """The batch of a "decode_b<N>" or "generate_b<N>" mode."""
    kind, _, batch = mode.partition("_b")
    if kind not in ("decode", "generate") or not batch.isdigit():
        raise ValueError(
            f"not a decode mode: {mode!r} (expected decode_b1, decode_b4, ..., generate_b4)"
        )
    return int(batch)


def decoder_modes(decode_batches: tuple) -> tuple:
    """A decoder's modes: prefill, a decode step per batch, and its sampling loop."""
    steps = tuple(f"decode_b{b}" for b in decode_batches)
    return ("prefill", *steps, f"generate_b{GENERATE_BATCH}")


def prompt_mask(batch: int, seq: int, seed: int) -> np.ndarray:
    """bool [batch, seq]: which prompt positions hold tokens. Row 0 is full (the longest prompt
    sets the shape); odd rows are left-padded, even rows right-padded; a batch of one is
    left-padded. Every row keeps at least one token."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), bool)
    for b in range(batch):
        if batch > 1 and b == 0:
            continue
        pad = int(rng.integers(seq // 4, 3 * seq // 4 + 1))
        if b % 2 == 1 or batch == 1:
            mask[b, :pad] = False
        else:
            mask[b, seq - pad :] = False
    return mask


def positions_of(mask: np.ndarray) -> np.ndarray:
    """int32 [batch, seq]: each token's position within its own prompt (0 on padding), as
    left-padded pipelines compute them."""
    return np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)


def cache_mask(batch: int, cache_len: int, index: int, seed: int) -> np.ndarray:
    """bool [batch, cache_len]: the cache slots a decode step at slot `index` may attend to
    (the new token's slot included). Unwritten slots (> index) are never valid. For padded
    batches: row 0 is a full prompt of `index` tokens, odd rows were left-padded, even rows
    right-padded (a hole between the prompt and the generated tokens), and with four or more
    rows the last is an empty serving slot: every key masked."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((batch, cache_len), bool)
    mask[:, : index + 1] = True
    for b in range(batch):
        if batch > 1 and b == 0:
            continue
        pad = int(rng.integers(index // 4, 3 * index // 4 + 1))
        if batch >= 4 and b == batch - 1:
            mask[b] = False
        elif b % 2 == 1 or batch == 1:
            mask[b, :pad] = False
        else:
            mask[b, index - pad : index] = False
    return mask


def decode_positions(mask: np.ndarray, index: int) -> np.ndarray:
    """int32 [batch, 1]: the position of the token written at slot `index` in each row."""
    return np.maximum(mask[:, :index].sum(axis=1), 0).astype(np.int32)[:, None]


def tokens(rng: np.random.Generator, shape, vocab: int, mask=None) -> np.ndarray:
    """Random token ids; padding (mask False) holds id 0, as tokenizers' pad id often is."""
    ids = rng.integers(1, vocab, size=shape).astype(np.int32)
    return ids if mask is None else np.where(mask, ids, 0).astype(np.int32)

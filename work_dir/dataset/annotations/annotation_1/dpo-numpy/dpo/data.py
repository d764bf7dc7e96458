"""Synthetic preference pairs: chosen responses use 'good' tokens, rejected ones do not."""
from __future__ import annotations

import numpy as np

IGNORE_INDEX = -100


def _sequences(prompts: np.ndarray, responses: np.ndarray) -> dict[str, np.ndarray]:
    """Split prompt+response into model inputs, labels and a response-only loss mask."""
    tokens = np.concatenate([prompts, responses], axis=1)
    inputs, labels = tokens[:, :-1], tokens[:, 1:].copy()
    loss_mask = np.zeros_like(labels, dtype=bool)
    loss_mask[:, prompts.shape[1] - 1:] = True
    labels[~loss_mask] = IGNORE_INDEX
    return {"inputs": inputs, "labels": labels, "loss_mask": loss_mask}


def make_preference_batch(rng: np.random.Generator, batch_size: int, prompt_len: int, response_len: int, vocab_size: int) -> dict[str, dict[str, np.ndarray]]:
    """A batch of (prompt, chosen, rejected) triples sharing each prompt."""
    half = vocab_size // 2
    prompts = rng.integers(0, vocab_size, size=(batch_size, prompt_len))
    chosen = rng.integers(0, half, size=(batch_size, response_len))
    rejected = rng.integers(half, vocab_size, size=(batch_size, response_len))
    return {"chosen": _sequences(prompts, chosen), "rejected": _sequences(prompts, rejected)}

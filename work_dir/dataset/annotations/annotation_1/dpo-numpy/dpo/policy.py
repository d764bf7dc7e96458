"""A bigram language model: the logits of the next token are a row of a V x V table."""
from __future__ import annotations

import numpy as np


class BigramPolicy:
    """pi(y_t | y_<t) = softmax(W[y_{t-1}]); small enough to differentiate by hand."""

    def __init__(self, vocab_size: int, rng: np.random.Generator, scale: float = 0.1) -> None:
        self.weights = scale * rng.standard_normal((vocab_size, vocab_size))

    def copy(self) -> "BigramPolicy":
        clone = object.__new__(BigramPolicy)
        clone.weights = self.weights.copy()
        return clone

    def logits(self, inputs: np.ndarray) -> np.ndarray:
        """(B, T) previous tokens -> (B, T, V) logits of the token at each position."""
        return self.weights[inputs]

    def backward(self, inputs: np.ndarray, labels: np.ndarray, loss_mask: np.ndarray, seq_coef: np.ndarray) -> np.ndarray:
        """Gradient of sum_b seq_coef[b] * log pi(y_b) with respect to ``weights``.

        d log softmax(z)[y] / dz = onehot(y) - softmax(z), restricted to masked tokens.
        """
        logits = self.logits(inputs)
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        mask = loss_mask.astype(bool)
        onehot = np.zeros_like(probs)
        rows, cols = np.nonzero(mask)
        onehot[rows, cols, labels[rows, cols]] = 1.0
        token_grad = (onehot - probs) * mask[..., None] * seq_coef[:, None, None]
        grad = np.zeros_like(self.weights)
        np.add.at(grad, inputs, token_grad)
        return grad

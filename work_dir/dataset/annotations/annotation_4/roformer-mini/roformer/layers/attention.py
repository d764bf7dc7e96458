"""Multi-head self-attention with rotary position embeddings on the queries and keys."""
from __future__ import annotations

import math

import torch
from torch import nn

from roformer.layers.rotary import RotaryEmbedding, apply_rotary_pos_emb


class RotarySelfAttention(nn.Module):
    """Positions enter only through the rotation of q and k, so scores depend on m - n."""

    def __init__(self, dim: int, num_heads: int, base: float = 10000.0) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"dim {dim} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.rotary = RotaryEmbedding(self.head_dim, base=base)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None, causal: bool = True) -> torch.Tensor:
        """x (B, T, dim); positions (T,) or (B, T), default 0..T-1 -> (B, T, dim)."""
        batch, length, dim = x.shape
        if positions is None:
            positions = torch.arange(length, device=x.device)
        q, k, v = (self._heads(part) for part in self.qkv(x).chunk(3, dim=-1))
        cos, sin = self.rotary(positions)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if causal:
            future = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        context = scores.softmax(dim=-1) @ v
        return self.out(context.transpose(1, 2).reshape(batch, length, dim))

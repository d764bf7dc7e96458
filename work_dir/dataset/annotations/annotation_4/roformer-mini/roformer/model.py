"""Pre-norm transformer language model without absolute position embeddings."""
from __future__ import annotations

import torch
from torch import nn

from roformer.layers.attention import RotarySelfAttention


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = RotarySelfAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), positions)
        return x + self.mlp(self.norm2(x))


class TinyRoFormer(nn.Module):
    """Token embedding -> blocks -> LM head; word order is known to the model only through RoPE."""

    def __init__(self, vocab_size: int = 64, dim: int = 32, num_heads: int = 4, num_layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList(Block(dim, num_heads) for _ in range(num_layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """tokens (B, T) -> next-token logits (B, T, vocab_size)."""
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, positions)
        return self.head(self.norm(x))

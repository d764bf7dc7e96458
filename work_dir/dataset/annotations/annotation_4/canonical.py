"""Rotary position embedding (RoPE) for the queries and keys of self-attention.

Su, Lu, Pan, Murtadha, Wen, Liu, "RoFormer: Enhanced Transformer with Rotary Position
Embedding" (arXiv 2104.09864; Neurocomputing 2024). Section 3.2 defines the rotation
and Section 3.4.2 its computationally efficient realisation.
"""
from __future__ import annotations

import torch
from torch import nn


def rotary_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """theta_i = base^(-2(i-1)/d), i = 1..d/2 (Theta of Section 3.2.2): float32, shape (d/2,).

    Pair i rotates with frequency theta_i; frequencies decay geometrically, which gives
    the long-term decay of the inner product with relative distance (Section 3.3).
    """
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even number, got {head_dim}")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim
    return 1.0 / (base**exponents)


class RotaryEmbedding(nn.Module):
    """cos(m theta_i) and sin(m theta_i) for the requested positions m.

    The frequencies are a fixed (non-trainable) buffer: RoPE adds no parameters.
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.base = base
        self.register_buffer("inv_freq", rotary_inv_freq(head_dim, base), persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions of any shape S -> (cos, sin), each float32 of shape S + (head_dim/2,)."""
        angles = positions.to(torch.float32)[..., None] * self.inv_freq
        return torch.cos(angles), torch.sin(angles)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """R^d_{Theta,m} x: the block-diagonal rotation of Section 3.2.2, computed element-wise
    as in Section 3.4.2 instead of multiplying by the sparse rotation matrix.

    Dimensions (2i, 2i+1) form the i-th 2-D pair, rotated by angle m theta_i:
    (x_{2i}, x_{2i+1}) -> (x_{2i} cos - x_{2i+1} sin, x_{2i} sin + x_{2i+1} cos).
    cos and sin broadcast against x[..., ::2]; the result keeps x's shape and dtype.
    """
    if x.shape[-1] % 2:
        raise ValueError(f"the last dimension must be even, got {x.shape[-1]}")
    cos = cos.to(x.dtype)
    sin = sin.to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2)


def apply_rotary_pos_emb(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate queries and keys (Section 3.2.2); values are left unchanged by the caller.

    q, k: (B, H, T, D). cos, sin: (T, D/2) for positions shared by the batch, or
    (B, T, D/2) for per-sequence positions, which get a head axis so they broadcast
    over the H heads. Then q_m^T k_n = x_m^T W_q^T R_{n-m} W_k x_n depends on n - m only.
    """
    if cos.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)

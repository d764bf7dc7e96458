"""Low-Rank Adaptation of a linear layer (Hu et al., 2021, "LoRA: Low-Rank Adaptation
of Large Language Models").

The pretrained weight W0 (out x in) is frozen and the update is constrained to
a low-rank product, W = W0 + (alpha / r) * B A with B (out x r), A (r x in) and
r << min(in, out) (Sec. 4.1). Only A and B are trained; after training B A can
be folded into W0 so inference costs exactly what the original layer costs.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class LoRALinear(nn.Module):
    """A frozen ``y = x W0^T + b`` plus a trainable low-rank branch ``(alpha / r) * dropout(x) A^T B^T``."""

    def __init__(self, in_features: int, out_features: int, r: int = 8, alpha: float = 16.0,
                 dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if isinstance(r, bool) or int(r) != r or r < 1:
            raise ValueError(f"rank r must be a positive integer, got {r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.in_features = in_features
        self.out_features = out_features
        self.r = int(r)
        self.alpha = alpha
        # Sec. 4.1: Delta W x is scaled by alpha / r, so changing r needs no re-tuning of the learning rate
        self.scaling = alpha / self.r
        # W0 and b are the pretrained parameters: frozen (Sec. 4.1, "W0 is frozen and does not receive gradient updates")
        self.weight = nn.Parameter(torch.empty(out_features, in_features), requires_grad=False)
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features), requires_grad=False)
        else:
            self.register_parameter("bias", None)
        self.lora_A = nn.Parameter(torch.empty(self.r, in_features))
        self.lora_B = nn.Parameter(torch.empty(out_features, self.r))
        self.lora_dropout = nn.Dropout(dropout)
        self.merged = False
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Base layer as torch.nn.Linear initialises it; A random Gaussian, B zero, so Delta W = BA = 0 at start."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
            nn.init.uniform_(self.bias, -bound, bound)
        nn.init.normal_(self.lora_A, mean=0.0, std=1.0 / self.r)  # Sec. 4.1: random Gaussian A
        nn.init.zeros_(self.lora_B)  # Sec. 4.1: zero B
        self.merged = False

    @classmethod
    def from_linear(cls, linear: nn.Linear, r: int = 8, alpha: float = 16.0, dropout: float = 0.0) -> "LoRALinear":
        """Wrap a pretrained nn.Linear: its weight and bias become the frozen W0 and b."""
        module = cls(linear.in_features, linear.out_features, r=r, alpha=alpha, dropout=dropout,
                     bias=linear.bias is not None)
        module.to(device=linear.weight.device, dtype=linear.weight.dtype)
        with torch.no_grad():
            module.weight.copy_(linear.weight)
            if linear.bias is not None:
                module.bias.copy_(linear.bias)
        return module

    def delta_weight(self) -> torch.Tensor:
        """Delta W = (alpha / r) * B A, shape (out_features, in_features)."""
        return (self.lora_B @ self.lora_A) * self.scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Eq. 3: h = W0 x + Delta W x = W0 x + B A x (scaled); after merge() only W0 + Delta W is used."""
        base = F.linear(x, self.weight, self.bias)
        if self.merged:
            return base
        # dropout acts on the input of the low-rank branch only; the frozen path sees x unchanged
        update = F.linear(F.linear(self.lora_dropout(x), self.lora_A), self.lora_B)
        return base + update * self.scaling

    def merge(self) -> None:
        """Fold Delta W into W0 for inference (Sec. 4.1, "No additional inference latency"); idempotent."""
        if self.merged:
            return
        with torch.no_grad():
            self.weight.add_(self.delta_weight())
        self.merged = True

    def unmerge(self) -> None:
        """Subtract Delta W again, recovering W0 (e.g. to switch to another task's A, B); idempotent."""
        if not self.merged:
            return
        with torch.no_grad():
            self.weight.sub_(self.delta_weight())
        self.merged = False

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, r={self.r}, "
                f"alpha={self.alpha}, bias={self.bias is not None}, merged={self.merged}")

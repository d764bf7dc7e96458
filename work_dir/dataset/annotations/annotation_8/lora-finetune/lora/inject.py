"""Put LoRA adapters into an existing model and manage them as a group."""
from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from lora.layers import LoRALinear


def inject_lora(model: nn.Module, target_names: Iterable[str], r: int = 8, alpha: float = 16.0,
                dropout: float = 0.0) -> list[str]:
    """Freeze `model` and replace each nn.Linear child whose attribute name is in `target_names`.

    Returns the dotted names of the replaced layers, so callers can check the
    adapters went where they expected.
    """
    wanted = set(target_names)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    replaced = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if child_name in wanted and isinstance(child, nn.Linear):
                setattr(parent, child_name, LoRALinear.from_linear(child, r=r, alpha=alpha, dropout=dropout))
                replaced.append(f"{parent_name}.{child_name}" if parent_name else child_name)
    return replaced


def lora_layers(model: nn.Module) -> list[LoRALinear]:
    return [module for module in model.modules() if isinstance(module, LoRALinear)]


def lora_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The trainable adapter matrices A and B of every LoRA layer."""
    return [p for layer in lora_layers(model) for p in (layer.lora_A, layer.lora_B)]


def merge_lora(model: nn.Module) -> None:
    for layer in lora_layers(model):
        layer.merge()


def unmerge_lora(model: nn.Module) -> None:
    for layer in lora_layers(model):
        layer.unmerge()

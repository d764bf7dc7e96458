"""One DPO optimisation step for the bigram policy against a frozen reference."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpo.losses import dpo_loss, dpo_loss_grad, preference_metrics, sequence_logps
from dpo.policy import BigramPolicy


@dataclass
class DPOConfig:
    beta: float = 0.1
    label_smoothing: float = 0.0
    learning_rate: float = 1.0
    reference_free: bool = False


class DPOTrainer:
    def __init__(self, policy: BigramPolicy, reference: BigramPolicy, config: DPOConfig) -> None:
        self.policy = policy
        self.reference = reference
        self.config = config

    def _logps(self, model: BigramPolicy, seqs: dict[str, np.ndarray]) -> np.ndarray:
        return sequence_logps(model.logits(seqs["inputs"]), seqs["labels"], seqs["loss_mask"])

    def step(self, batch: dict[str, dict[str, np.ndarray]]) -> dict[str, float]:
        """Compute the DPO loss of ``batch``, take one SGD step and return the statistics."""
        chosen, rejected = batch["chosen"], batch["rejected"]
        logps = (
            self._logps(self.policy, chosen),
            self._logps(self.policy, rejected),
            self._logps(self.reference, chosen),
            self._logps(self.reference, rejected),
        )
        options = {
            "beta": self.config.beta,
            "label_smoothing": self.config.label_smoothing,
            "reference_free": self.config.reference_free,
        }
        losses, chosen_rewards, rejected_rewards = dpo_loss(*logps, **options)
        grad_chosen, grad_rejected = dpo_loss_grad(*logps, **options)
        batch_size = losses.shape[0]
        grad = self.policy.backward(chosen["inputs"], chosen["labels"], chosen["loss_mask"], grad_chosen / batch_size)
        grad += self.policy.backward(rejected["inputs"], rejected["labels"], rejected["loss_mask"], grad_rejected / batch_size)
        self.policy.weights -= self.config.learning_rate * grad
        metrics = preference_metrics(chosen_rewards, rejected_rewards)
        metrics["loss"] = float(losses.mean())
        return metrics

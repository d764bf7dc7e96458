"""Direct Preference Optimization (DPO): loss, its gradient and implicit-reward statistics.

Rafailov, Sharma, Mitchell, Ermon, Manning, Finn, "Direct Preference Optimization:
Your Language Model is Secretly a Reward Model", NeurIPS 2023. Equation numbers
below refer to that paper. All functions work on per-sequence log-probabilities,
so they are independent of how the language model itself is built.
"""
from __future__ import annotations

import numpy as np


def log_sigmoid(x: np.ndarray) -> np.ndarray:
    """log sigma(x) = -log(1 + exp(-x)), finite for every finite x (no overflow at |x| ~ 1e3)."""
    return -np.logaddexp(0.0, -np.asarray(x, dtype=np.float64))


def sequence_logps(logits: np.ndarray, labels: np.ndarray, loss_mask: np.ndarray, average: bool = False) -> np.ndarray:
    """log pi(y | x): sum over the response tokens of log pi(y_t | x, y_<t).

    DPO compares whole-sequence log-likelihoods (the pi(y|x) terms of Eq. 7), so the
    token log-probabilities are summed over the positions selected by ``loss_mask``
    (prompt and padding positions are excluded). ``average`` divides by the number of
    selected tokens instead (a length-normalised variant); a row with no selected
    token gives 0 in both modes. Labels at unselected positions may hold anything
    (e.g. -100) and are never used as indices.
    """
    logits = np.asarray(logits, dtype=np.float64)
    mask = np.asarray(loss_mask).astype(bool)
    safe_labels = np.where(mask, np.asarray(labels), 0).astype(np.int64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    token_logps = np.take_along_axis(log_probs, safe_labels[..., None], axis=-1)[..., 0]
    total = np.where(mask, token_logps, 0.0).sum(axis=-1)
    if average:
        return total / np.maximum(mask.sum(axis=-1), 1)
    return total


def _preference_logits(
    policy_chosen_logps: np.ndarray,
    policy_rejected_logps: np.ndarray,
    reference_chosen_logps: np.ndarray,
    reference_rejected_logps: np.ndarray,
    beta: float,
    label_smoothing: float,
    reference_free: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Validate the options and return the chosen / rejected log-ratios log pi/pi_ref."""
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    if not 0.0 <= label_smoothing < 0.5:
        raise ValueError(f"label_smoothing must be in [0, 0.5), got {label_smoothing}")
    chosen = np.asarray(policy_chosen_logps, dtype=np.float64)
    rejected = np.asarray(policy_rejected_logps, dtype=np.float64)
    if not reference_free:
        # Section 4: the reward is parameterised as beta * log(pi / pi_ref).
        chosen = chosen - np.asarray(reference_chosen_logps, dtype=np.float64)
        rejected = rejected - np.asarray(reference_rejected_logps, dtype=np.float64)
    return chosen, rejected


def dpo_loss(
    policy_chosen_logps: np.ndarray,
    policy_rejected_logps: np.ndarray,
    reference_chosen_logps: np.ndarray,
    reference_rejected_logps: np.ndarray,
    beta: float = 0.1,
    label_smoothing: float = 0.0,
    reference_free: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-example DPO loss (Eq. 7) and the implicit rewards of both responses (Eq. 5).

    L = -log sigma(beta * [(log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l))]).
    With ``label_smoothing`` eps the preference label is assumed flipped with
    probability eps (conservative DPO): L = -(1-eps) log sigma(z) - eps log sigma(-z).
    ``reference_free`` uses a uniform reference (its log-probabilities count as 0).
    """
    chosen_ratio, rejected_ratio = _preference_logits(
        policy_chosen_logps, policy_rejected_logps, reference_chosen_logps, reference_rejected_logps,
        beta, label_smoothing, reference_free,
    )
    z = beta * (chosen_ratio - rejected_ratio)
    losses = -(1.0 - label_smoothing) * log_sigmoid(z) - label_smoothing * log_sigmoid(-z)
    # Eq. 5: r(x, y) = beta log pi(y|x)/pi_ref(y|x) + beta log Z(x); Z(x) cancels in Eq. 6,
    # so the implicit reward reported per response is beta times the log-ratio.
    return losses, beta * chosen_ratio, beta * rejected_ratio


def dpo_loss_grad(
    policy_chosen_logps: np.ndarray,
    policy_rejected_logps: np.ndarray,
    reference_chosen_logps: np.ndarray,
    reference_rejected_logps: np.ndarray,
    beta: float = 0.1,
    label_smoothing: float = 0.0,
    reference_free: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Derivatives of each example's loss w.r.t. log pi(y_w|x) and log pi(y_l|x).

    Section 4 ("What does the DPO update do?"): dL/dlog pi(y_w) = -beta * sigma(r_l - r_w),
    i.e. examples the implicit reward model orders wrongly get larger weights; the
    rejected derivative is the negative. With label smoothing the eps term adds
    beta * eps * sigma(z).
    """
    chosen_ratio, rejected_ratio = _preference_logits(
        policy_chosen_logps, policy_rejected_logps, reference_chosen_logps, reference_rejected_logps,
        beta, label_smoothing, reference_free,
    )
    z = beta * (chosen_ratio - rejected_ratio)
    d_z = -(1.0 - label_smoothing) * np.exp(log_sigmoid(-z)) + label_smoothing * np.exp(log_sigmoid(z))
    d_chosen = beta * d_z
    return d_chosen, -d_chosen


def preference_metrics(chosen_rewards: np.ndarray, rejected_rewards: np.ndarray) -> dict[str, float]:
    """Batch means of the implicit rewards, their margin and the preference accuracy.

    Accuracy counts a pair as correct only when the chosen reward is strictly larger.
    """
    chosen = np.asarray(chosen_rewards, dtype=np.float64)
    rejected = np.asarray(rejected_rewards, dtype=np.float64)
    return {
        "rewards/chosen": float(chosen.mean()),
        "rewards/rejected": float(rejected.mean()),
        "rewards/margins": float((chosen - rejected).mean()),
        "rewards/accuracies": float((chosen > rejected).mean()),
    }

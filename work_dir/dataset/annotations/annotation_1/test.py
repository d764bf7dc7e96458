"""Differential tests: dpo/losses.py against the reference canonical.py under fixed seeds."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import canonical  # noqa: E402
from dpo import losses as target  # noqa: E402

RTOL, ATOL = 1e-7, 1e-9


def assert_same(actual, expected):
    """Element-wise equality within tolerance, for arrays or tuples of arrays."""
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for got, want in zip(actual, expected):
            assert_same(got, want)
        return
    got = np.asarray(actual)
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def random_logps(seed, batch=8, scale=20.0):
    """Four (batch,) arrays of negative sequence log-probabilities."""
    rng = np.random.default_rng(seed)
    return tuple(-scale * rng.random(batch) for _ in range(4))


def test_log_sigmoid_stable():
    x = np.concatenate([np.linspace(-50, 50, 101), [-1000.0, -745.0, 0.0, 745.0, 1000.0]])
    got = np.asarray(target.log_sigmoid(x))
    assert np.all(np.isfinite(got))
    assert_same(got, canonical.log_sigmoid(x))


def test_sequence_logps_sum_with_mask():
    rng = np.random.default_rng(0)
    batch, length, vocab = 4, 7, 11
    logits = 3.0 * rng.standard_normal((batch, length, vocab))
    labels = rng.integers(0, vocab, size=(batch, length))
    mask = np.ones((batch, length), dtype=bool)
    mask[:, :3] = False
    mask[1, 5:] = False
    labels[~mask] = -100
    assert_same(target.sequence_logps(logits, labels, mask), canonical.sequence_logps(logits, labels, mask))
    huge = logits * 400.0
    got = np.asarray(target.sequence_logps(huge, labels, mask.astype(np.int64)))
    assert np.all(np.isfinite(got))
    assert_same(got, canonical.sequence_logps(huge, labels, mask))


def test_sequence_logps_average_and_empty_rows():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((3, 5, 6))
    labels = rng.integers(0, 6, size=(3, 5))
    mask = rng.random((3, 5)) > 0.4
    mask[2] = False
    labels[2] = -100
    for average in (False, True):
        want = canonical.sequence_logps(logits, labels, mask, average=average)
        assert_same(target.sequence_logps(logits, labels, mask, average=average), want)
        assert want[2] == 0.0


def test_dpo_loss_and_rewards():
    for seed, beta in ((2, 0.1), (3, 0.5), (4, 2.0)):
        logps = random_logps(seed)
        assert_same(target.dpo_loss(*logps, beta=beta), canonical.dpo_loss(*logps, beta=beta))
    logps = random_logps(5)
    assert_same(target.dpo_loss(*logps), canonical.dpo_loss(*logps))


def test_dpo_loss_label_smoothing_and_reference_free():
    logps = random_logps(6)
    for options in (
        {"beta": 0.3, "label_smoothing": 0.2},
        {"beta": 0.3, "reference_free": True},
        {"beta": 1.0, "label_smoothing": 0.1, "reference_free": True},
    ):
        assert_same(target.dpo_loss(*logps, **options), canonical.dpo_loss(*logps, **options))


def test_dpo_loss_extreme_margins():
    chosen = np.array([0.0, -5000.0, -1.0, -3000.0])
    rejected = np.array([-5000.0, 0.0, -1.0, -3000.0])
    reference = np.zeros(4)
    got = target.dpo_loss(chosen, rejected, reference, reference, beta=1.0)
    assert all(np.all(np.isfinite(part)) for part in got)
    assert_same(got, canonical.dpo_loss(chosen, rejected, reference, reference, beta=1.0))
    assert_same(
        target.dpo_loss_grad(chosen, rejected, reference, reference, beta=1.0),
        canonical.dpo_loss_grad(chosen, rejected, reference, reference, beta=1.0),
    )


def test_dpo_loss_invalid_options():
    logps = random_logps(7, batch=2)
    for options in ({"beta": 0.0}, {"beta": -0.1}, {"label_smoothing": 0.5}, {"label_smoothing": -0.1}):
        with pytest.raises(ValueError):
            canonical.dpo_loss(*logps, **options)
        with pytest.raises(ValueError):
            target.dpo_loss(*logps, **options)


def test_dpo_loss_grad():
    logps = random_logps(8, scale=5.0)
    for options in ({"beta": 0.5}, {"beta": 0.5, "label_smoothing": 0.15}, {"beta": 0.5, "reference_free": True}):
        got = target.dpo_loss_grad(*logps, **options)
        assert_same(got, canonical.dpo_loss_grad(*logps, **options))
        step = 1e-6
        bumped = (logps[0] + step,) + logps[1:]
        numeric = (target.dpo_loss(*bumped, **options)[0] - target.dpo_loss(*logps, **options)[0]) / step
        np.testing.assert_allclose(got[0], numeric, rtol=1e-4, atol=1e-6)


def test_preference_metrics():
    rng = np.random.default_rng(9)
    chosen = rng.standard_normal(16)
    rejected = rng.standard_normal(16)
    rejected[:4] = chosen[:4]
    got = target.preference_metrics(chosen, rejected)
    want = canonical.preference_metrics(chosen, rejected)
    assert set(got) == set(want)
    for key, value in want.items():
        assert isinstance(got[key], float)
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_trainer_step_integration(monkeypatch):
    from dpo import trainer as trainer_module
    from dpo.data import make_preference_batch
    from dpo.policy import BigramPolicy

    def run():
        rng = np.random.default_rng(10)
        policy = BigramPolicy(vocab_size=8, rng=rng, scale=0.5)
        config = trainer_module.DPOConfig(beta=0.5, label_smoothing=0.1, learning_rate=2.0)
        trainer = trainer_module.DPOTrainer(policy, policy.copy(), config)
        history = [trainer.step(make_preference_batch(rng, 6, 3, 4, 8)) for _ in range(3)]
        return history, policy.weights

    got_history, got_weights = run()
    for name in ("sequence_logps", "dpo_loss", "dpo_loss_grad", "preference_metrics"):
        monkeypatch.setattr(trainer_module, name, getattr(canonical, name))
    want_history, want_weights = run()
    assert_same(got_weights, want_weights)
    for got, want in zip(got_history, want_history):
        assert got == pytest.approx(want, rel=1e-7, abs=1e-9)

"""Differential tests: retina/losses/focal.py against the reference canonical.py under fixed seeds."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import canonical  # noqa: E402
from retina.losses import focal as target  # noqa: E402

RTOL, ATOL = 1e-8, 1e-10


def assert_same(actual, expected):
    """Values agree in shape and (within tolerance) in value; floats stay Python floats."""
    if isinstance(expected, float):
        assert isinstance(actual, float), f"expected a Python float, got {type(actual).__name__}"
    assert np.shape(actual) == np.shape(expected)
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def binary_problem(seed, shape=(40,), scale=3.0):
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal(shape), (rng.random(shape) < 0.3).astype(np.float64)


def test_prior_bias():
    for prior in (0.01, 0.1, 0.5, 0.9):
        assert_same(target.prior_bias(prior), canonical.prior_bias(prior))
    assert_same(target.prior_bias(), canonical.prior_bias())
    for prior in (0.0, 1.0, -0.2):
        with pytest.raises(ValueError):
            target.prior_bias(prior)


def test_sigmoid_focal_loss_elementwise():
    logits, targets = binary_problem(0, shape=(6, 7))
    for alpha, gamma in ((0.25, 2.0), (0.75, 0.5), (0.5, 5.0)):
        assert_same(
            target.sigmoid_focal_loss(logits, targets, alpha=alpha, gamma=gamma),
            canonical.sigmoid_focal_loss(logits, targets, alpha=alpha, gamma=gamma),
        )
    assert_same(target.sigmoid_focal_loss(logits, targets), canonical.sigmoid_focal_loss(logits, targets))


def test_sigmoid_focal_loss_reductions_and_validation():
    logits, targets = binary_problem(1)
    for reduction in ("none", "sum", "mean"):
        assert_same(
            target.sigmoid_focal_loss(logits, targets, reduction=reduction),
            canonical.sigmoid_focal_loss(logits, targets, reduction=reduction),
        )
    for options in ({"reduction": "max"}, {"gamma": -1.0}):
        with pytest.raises(ValueError):
            target.sigmoid_focal_loss(logits, targets, **options)


def test_gamma_zero_and_no_alpha():
    logits, targets = binary_problem(2)
    for alpha, gamma in ((None, 0.0), (None, 2.0), (0.25, 0.0)):
        assert_same(
            target.sigmoid_focal_loss(logits, targets, alpha=alpha, gamma=gamma, reduction="mean"),
            canonical.sigmoid_focal_loss(logits, targets, alpha=alpha, gamma=gamma, reduction="mean"),
        )


def test_extreme_logits_are_finite():
    logits = np.array([1000.0, -1000.0, 1000.0, -1000.0, 40.0, -40.0, 0.0])
    targets = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    got = np.asarray(target.sigmoid_focal_loss(logits, targets))
    assert np.all(np.isfinite(got))
    assert_same(got, canonical.sigmoid_focal_loss(logits, targets))
    grad = np.asarray(target.sigmoid_focal_loss_grad(logits, targets))
    assert np.all(np.isfinite(grad))
    assert_same(grad, canonical.sigmoid_focal_loss_grad(logits, targets))
    rows = np.array([[1000.0, -1000.0, 0.0], [-800.0, 900.0, 5.0]])
    labels = np.array([1, 0])
    assert_same(target.softmax_focal_loss(rows, labels, reduction="none"), canonical.softmax_focal_loss(rows, labels, reduction="none"))


def test_sigmoid_focal_loss_grad():
    logits, targets = binary_problem(3, scale=2.0)
    for alpha, gamma in ((0.25, 2.0), (None, 0.0), (0.6, 1.5)):
        got = target.sigmoid_focal_loss_grad(logits, targets, alpha=alpha, gamma=gamma)
        assert_same(got, canonical.sigmoid_focal_loss_grad(logits, targets, alpha=alpha, gamma=gamma))
        step = 1e-6
        upper = target.sigmoid_focal_loss(logits + step, targets, alpha=alpha, gamma=gamma)
        lower = target.sigmoid_focal_loss(logits - step, targets, alpha=alpha, gamma=gamma)
        np.testing.assert_allclose(got, (upper - lower) / (2 * step), rtol=1e-5, atol=1e-7)


def test_softmax_focal_loss_class_weights_and_ignore():
    rng = np.random.default_rng(4)
    logits = 2.0 * rng.standard_normal((30, 5))
    labels = rng.integers(0, 5, size=30)
    labels[::4] = -1
    weights = rng.random(5)
    for options in ({}, {"alpha": weights}, {"alpha": weights, "gamma": 0.0}, {"gamma": 3.0, "reduction": "sum"}):
        assert_same(target.softmax_focal_loss(logits, labels, **options), canonical.softmax_focal_loss(logits, labels, **options))
    labels[labels == -1] = 7
    assert_same(
        target.softmax_focal_loss(logits, labels, ignore_index=7, reduction="none"),
        canonical.softmax_focal_loss(logits, labels, ignore_index=7, reduction="none"),
    )


def test_softmax_focal_loss_all_ignored():
    logits = np.random.default_rng(5).standard_normal((4, 3))
    labels = np.full(4, -1)
    for reduction in ("mean", "sum", "none"):
        assert_same(
            target.softmax_focal_loss(logits, labels, reduction=reduction),
            canonical.softmax_focal_loss(logits, labels, reduction=reduction),
        )
    with pytest.raises(ValueError):
        target.softmax_focal_loss(logits, labels, reduction="avg")


def test_retinanet_classification_loss_normalization():
    rng = np.random.default_rng(6)
    logits = rng.standard_normal((200, 4)) - 3.0
    labels = np.zeros(200, dtype=np.int64)
    labels[rng.choice(200, 12, replace=False)] = rng.integers(1, 5, size=12)
    labels[rng.choice(np.flatnonzero(labels == 0), 20, replace=False)] = -1
    for alpha, gamma in ((0.25, 2.0), (0.5, 0.0)):
        assert_same(
            target.retinanet_classification_loss(logits, labels, alpha=alpha, gamma=gamma),
            canonical.retinanet_classification_loss(logits, labels, alpha=alpha, gamma=gamma),
        )
    background = np.where(labels > 0, 0, labels)
    assert_same(target.retinanet_classification_loss(logits, background), canonical.retinanet_classification_loss(logits, background))


def test_head_and_criterion_integration(monkeypatch):
    import demo
    from retina import criterion, head

    got = demo.initial_loss(seed=7, num_anchors=500)
    monkeypatch.setattr(head, "prior_bias", canonical.prior_bias)
    monkeypatch.setattr(criterion, "retinanet_classification_loss", canonical.retinanet_classification_loss)
    want = demo.initial_loss(seed=7, num_anchors=500)
    assert set(got) == set(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-8, abs=1e-10)

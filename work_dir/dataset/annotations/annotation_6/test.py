"""Differential tests: calibration/temperature_scaling.py against canonical.py under fixed seeds."""
import numpy as np
import pytest

from calibration import canonical as reference
from calibration import temperature_scaling as target


def synthetic_logits(seed, n=300, k=5, sharpness=3.0):
    """Labels drawn from softmax(z); logits sharpness * z (over-confident when sharpness > 1)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(n, k))
    labels = np.argmax(z + rng.gumbel(size=z.shape), axis=1)
    return sharpness * z, labels


def boundary_probs():
    """Probabilities whose max lands exactly on bin edges of 4 bins (0.25, 0.5, 0.75, 1.0)."""
    probs = np.array([
        [0.5, 0.3, 0.2],
        [0.5, 0.25, 0.25],
        [0.25, 0.5, 0.25],
        [0.75, 0.125, 0.125],
        [0.125, 0.75, 0.125],
        [0.6, 0.2, 0.2],
        [0.3, 0.3, 0.4],
        [1.0, 0.0, 0.0],
        [0.0, 0.45, 0.55],
        [0.8, 0.1, 0.1],
    ])
    labels = np.array([0, 1, 1, 0, 2, 0, 2, 0, 1, 0])
    return probs, labels


def test_softmax_equivalence():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 4)) * 3.0
    for temperature in (1.0, 0.5, 2.5):
        got = np.asarray(target.softmax(logits, temperature))
        want = reference.softmax(logits, temperature)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(
            np.asarray(target.log_softmax(logits, temperature)), reference.log_softmax(logits, temperature), rtol=1e-10
        )
    # huge logits overflow a naive exp(); the shifted form stays exact
    huge = np.array([[1000.0, 999.0, -1000.0], [-800.0, -790.0, -805.0]])
    got = np.asarray(target.softmax(huge, 0.5))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, reference.softmax(huge, 0.5), rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(
        np.asarray(target.log_softmax(huge)), reference.log_softmax(huge), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(np.asarray(target.softmax(logits)), reference.softmax(logits), rtol=1e-10)


def test_negative_log_likelihood_equivalence():
    logits, labels = synthetic_logits(1, n=50)
    for temperature in (1.0, 0.3, 4.0):
        got = target.negative_log_likelihood(logits, labels, temperature)
        want = reference.negative_log_likelihood(logits, labels, temperature)
        assert got == pytest.approx(want, rel=1e-10)
    # confidently wrong predictions on huge logits: finite, large NLL
    huge = np.array([[900.0, 0.0], [0.0, 700.0]])
    wrong = np.array([1, 0])
    got = target.negative_log_likelihood(huge, wrong)
    assert np.isfinite(got)
    assert got == pytest.approx(reference.negative_log_likelihood(huge, wrong), rel=1e-10)
    assert target.negative_log_likelihood(logits, labels) == pytest.approx(
        reference.negative_log_likelihood(logits, labels), rel=1e-10
    )


def test_fit_temperature_equivalence():
    for seed, sharpness in ((2, 3.0), (3, 0.4), (4, 1.0)):
        logits, labels = synthetic_logits(seed, sharpness=sharpness)
        got = target.fit_temperature(logits, labels)
        want = reference.fit_temperature(logits, labels)
        assert got == pytest.approx(want, rel=1e-4)
        # the fitted temperature never does worse than T = 1 on the data it was fitted on
        assert reference.negative_log_likelihood(logits, labels, got) <= reference.negative_log_likelihood(
            logits, labels, 1.0
        ) + 1e-12
    logits, labels = synthetic_logits(5, sharpness=2.0)
    got = target.fit_temperature(logits, labels, bounds=(0.5, 8.0))
    assert got == pytest.approx(reference.fit_temperature(logits, labels, bounds=(0.5, 8.0)), rel=1e-4)


def test_fit_temperature_bounds_equivalence():
    # every validation sample correct with a margin: the NLL keeps falling as T -> 0,
    # so the minimiser is the lower bound (margins are small enough that the NLL is
    # still well resolved in float64 at the bound)
    logits = np.array([[3.0, 0.0, -1.0], [0.5, 2.0, 0.0], [-1.0, 0.0, 1.5], [4.0, 1.0, 0.0]])
    labels = np.array([0, 1, 2, 0])
    for scale, bounds in ((0.05, (0.05, 20.0)), (1.0, (0.5, 2.0))):
        got = target.fit_temperature(scale * logits, labels, bounds=bounds)
        want = reference.fit_temperature(scale * logits, labels, bounds=bounds)
        assert got == pytest.approx(want, rel=1e-3)
        assert bounds[0] <= got <= bounds[1]
    # every prediction wrong: the NLL keeps falling as T grows, so the upper bound wins
    got = target.fit_temperature(logits, np.array([2, 0, 0, 1]), bounds=(0.5, 2.0))
    assert got == pytest.approx(reference.fit_temperature(logits, np.array([2, 0, 0, 1]), bounds=(0.5, 2.0)), rel=1e-3)
    for bad in ((2.0, 1.0), (0.0, 1.0), (-1.0, 3.0)):
        with pytest.raises(ValueError):
            reference.fit_temperature(logits, labels, bounds=bad)
        with pytest.raises(ValueError):
            target.fit_temperature(logits, labels, bounds=bad)


def test_bin_statistics_equivalence():
    confidences = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 0.3, 0.6, 0.5, 0.26, 0.74])
    correct = np.array([0, 1, 1, 0, 1, 1, 0, 0, 1, 1], dtype=bool)
    rng = np.random.default_rng(6)
    cases = [
        (confidences, correct, 4),
        (confidences, correct, 1),
        (rng.random(200), rng.random(200) < 0.6, 15),
        (np.array([0.9, 0.95]), np.array([1, 1]), 10),
    ]
    for conf, corr, n_bins in cases:
        got = target.bin_statistics(conf, corr, n_bins)
        want = reference.bin_statistics(conf, corr, n_bins)
        assert set(got) >= {"edges", "counts", "confidence", "accuracy"}
        np.testing.assert_allclose(np.asarray(got["edges"]), want["edges"], rtol=0, atol=1e-15)
        np.testing.assert_array_equal(np.asarray(got["counts"]), want["counts"])
        np.testing.assert_allclose(np.asarray(got["confidence"]), want["confidence"], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(np.asarray(got["accuracy"]), want["accuracy"], rtol=1e-12, atol=1e-15)


def test_expected_calibration_error_equivalence():
    rng = np.random.default_rng(7)
    probs = rng.dirichlet(np.full(4, 0.5), size=500)
    labels = rng.integers(0, 4, size=500)
    for n_bins in (1, 5, 15):
        got = target.expected_calibration_error(probs, labels, n_bins)
        assert got == pytest.approx(reference.expected_calibration_error(probs, labels, n_bins), rel=1e-10, abs=1e-14)
    assert target.expected_calibration_error(probs, labels) == pytest.approx(
        reference.expected_calibration_error(probs, labels), rel=1e-10
    )
    # confidences exactly on bin edges belong to the bin they close: (m/M, (m+1)/M]
    probs, labels = boundary_probs()
    for n_bins in (2, 4, 8):
        got = target.expected_calibration_error(probs, labels, n_bins)
        assert got == pytest.approx(reference.expected_calibration_error(probs, labels, n_bins), rel=1e-10, abs=1e-14)


def test_maximum_calibration_error_equivalence():
    probs, labels = boundary_probs()
    for n_bins in (2, 4, 8):
        got = target.maximum_calibration_error(probs, labels, n_bins)
        assert got == pytest.approx(reference.maximum_calibration_error(probs, labels, n_bins), rel=1e-10, abs=1e-14)
    logits, labels = synthetic_logits(8, n=200, sharpness=3.0)
    probs = reference.softmax(logits)
    got = target.maximum_calibration_error(probs, labels)
    assert got == pytest.approx(reference.maximum_calibration_error(probs, labels), rel=1e-10)


def test_temperature_scaler_equivalence():
    val_logits, val_labels = synthetic_logits(9, sharpness=2.5)
    test_logits, _ = synthetic_logits(10, n=40, sharpness=2.5)
    with pytest.raises(RuntimeError):
        target.TemperatureScaler().predict_proba(test_logits)
    scaler = target.TemperatureScaler()
    assert scaler.temperature_ is None
    assert scaler.fit(val_logits, val_labels) is scaler
    want = reference.TemperatureScaler().fit(val_logits, val_labels)
    assert scaler.temperature_ == pytest.approx(want.temperature_, rel=1e-4)
    got = np.asarray(scaler.predict_proba(test_logits))
    np.testing.assert_allclose(got, want.predict_proba(test_logits), rtol=1e-3, atol=1e-6)
    # scaling by a positive temperature never changes the predicted class
    np.testing.assert_array_equal(got.argmax(axis=1), test_logits.argmax(axis=1))
    bounded = target.TemperatureScaler(bounds=(0.1, 1.5)).fit(val_logits, val_labels)
    assert bounded.temperature_ == pytest.approx(
        reference.TemperatureScaler(bounds=(0.1, 1.5)).fit(val_logits, val_labels).temperature_, rel=1e-3
    )


def test_input_validation_equivalence():
    logits = np.zeros((3, 4))
    probs = np.full((3, 4), 0.25)
    bad_calls = [
        lambda m: m.softmax(np.zeros(4)),
        lambda m: m.softmax(np.zeros((3, 1))),
        lambda m: m.softmax(logits, 0.0),
        lambda m: m.softmax(logits, -1.0),
        lambda m: m.negative_log_likelihood(logits, np.array([0, 1, 4])),
        lambda m: m.negative_log_likelihood(logits, np.array([0, 1])),
        lambda m: m.negative_log_likelihood(logits, np.array([0.0, 1.0, 2.0])),
        lambda m: m.expected_calibration_error(probs, np.array([0, 1, 2]), 0),
        lambda m: m.expected_calibration_error(probs, np.array([-1, 1, 2])),
        lambda m: m.bin_statistics(np.array([0.5, 1.2]), np.array([1, 0])),
        lambda m: m.bin_statistics(np.array([0.5, 0.6]), np.array([1, 0, 1])),
    ]
    for call in bad_calls:
        with pytest.raises(ValueError):
            call(reference)
        with pytest.raises(ValueError):
            call(target)

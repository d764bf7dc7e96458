"""Differential tests: optim/adamw.py against the reference canonical.py under fixed seeds."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import canonical  # noqa: E402
from optim import adamw as target  # noqa: E402

RTOL, ATOL = 1e-9, 1e-12


def assert_updates_equal(got, want):
    """(param, exp_avg, exp_avg_sq) triples agree in shape and value."""
    assert isinstance(got, tuple) and len(got) == 3
    for actual, expected in zip(got, want):
        assert np.shape(actual) == np.shape(expected)
        np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def run_both(param, grads, **options):
    """Feed the same gradient sequence to both implementations, comparing after every step."""
    mine = ref = (param, np.zeros_like(param), np.zeros_like(param))
    for t, grad in enumerate(grads, start=1):
        mine = target.adamw_update(mine[0], grad, mine[1], mine[2], t, **options)
        ref = canonical.adamw_update(ref[0], grad, ref[1], ref[2], t, **options)
        assert_updates_equal(mine, ref)


def test_first_step_bias_correction():
    rng = np.random.default_rng(0)
    param = rng.standard_normal(12)
    grad = rng.standard_normal(12) * np.logspace(-3, 2, 12)
    options = {"lr": 0.01, "weight_decay": 0.0}
    run_both(param, [grad], **options)
    run_both(param, [grad], lr=0.01, betas=(0.5, 0.9), weight_decay=0.0)


def test_multi_step_trajectory():
    rng = np.random.default_rng(1)
    param = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) * (1.0 + t % 3) for t in range(25)]
    run_both(param, grads, lr=3e-3, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.05)


def test_decoupled_decay_with_zero_gradient():
    rng = np.random.default_rng(2)
    param = rng.standard_normal(6)
    zeros = [np.zeros(6)] * 3
    run_both(param, zeros, lr=0.1, weight_decay=0.2)
    run_both(param, [rng.standard_normal(6) * 1e3 for _ in range(4)], lr=0.5, weight_decay=0.1)


def test_schedule_multiplier():
    rng = np.random.default_rng(3)
    param = rng.standard_normal(8)
    grads = [rng.standard_normal(8) for _ in range(5)]
    for multiplier in (0.0, 0.3, 1.0):
        run_both(param, grads, lr=0.02, weight_decay=0.1, schedule_multiplier=multiplier)


def test_epsilon_with_tiny_gradients():
    rng = np.random.default_rng(4)
    param = rng.standard_normal(10)
    grads = [rng.standard_normal(10) * 1e-9 for _ in range(6)]
    run_both(param, grads, lr=1e-2, eps=1e-8, weight_decay=0.0)
    run_both(param, grads[:2], lr=1e-2, eps=0.0, weight_decay=0.0)


def test_update_is_pure_and_validates():
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(5) for _ in range(4)]
    arrays[3] = np.abs(arrays[3])
    before = [a.copy() for a in arrays]
    target.adamw_update(*arrays, 3, lr=0.1, weight_decay=0.1)
    for after, original in zip(arrays, before):
        np.testing.assert_array_equal(after, original)
    for step, options in ((0, {}), (1, {"lr": -1.0}), (1, {"betas": (1.0, 0.999)}), (1, {"eps": -1e-8}), (1, {"weight_decay": -0.1})):
        with pytest.raises(ValueError):
            canonical.adamw_update(*arrays, step, **options)
        with pytest.raises(ValueError):
            target.adamw_update(*arrays, step, **options)


def make_params(seed):
    rng = np.random.default_rng(seed)
    return {"W": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}


def test_optimizer_in_place_with_no_decay():
    rng = np.random.default_rng(6)
    params, ref_params = make_params(7), make_params(7)
    arrays = dict(params)
    options = {"lr": 0.05, "betas": (0.85, 0.99), "eps": 1e-7, "weight_decay": 0.3, "no_decay": ("b",)}
    opt = target.AdamW(params, **options)
    ref = canonical.AdamW(ref_params, **options)
    for t in range(6):
        grads = {"W": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
        opt.step(grads, schedule_multiplier=1.0 - 0.1 * t)
        ref.step(grads, schedule_multiplier=1.0 - 0.1 * t)
    assert opt.params is params
    for name in params:
        assert params[name] is arrays[name]
        np.testing.assert_allclose(params[name], ref_params[name], rtol=RTOL, atol=ATOL)
        assert opt.state[name]["step"] == ref.state[name]["step"] == 6
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_allclose(opt.state[name][key], ref.state[name][key], rtol=RTOL, atol=ATOL)
    with pytest.raises(ValueError):
        target.AdamW(make_params(7), no_decay=("missing",))


def test_optimizer_skips_missing_gradients():
    rng = np.random.default_rng(8)
    params, ref_params = make_params(9), make_params(9)
    opt = target.AdamW(params, lr=0.1, weight_decay=0.05)
    ref = canonical.AdamW(ref_params, lr=0.1, weight_decay=0.05)
    for t in range(5):
        grads = {"W": rng.standard_normal((3, 2))}
        if t >= 3:
            grads["b"] = rng.standard_normal(2)
        opt.step(grads)
        ref.step(grads)
        for name in params:
            np.testing.assert_allclose(params[name], ref_params[name], rtol=RTOL, atol=ATOL)
    assert opt.state["b"]["step"] == 2 and opt.state["W"]["step"] == 5
    with pytest.raises(KeyError):
        opt.step({"unknown": np.zeros(1)})


def test_normalized_weight_decay():
    for args in ((0.05, 128, 50000, 100), (1.0, 1, 1, 1), (0.025, 16, 128, 5)):
        got = target.normalized_weight_decay(*args)
        assert isinstance(got, float)
        assert got == pytest.approx(canonical.normalized_weight_decay(*args), rel=1e-12)
    with pytest.raises(ValueError):
        target.normalized_weight_decay(0.05, 0, 100, 1)


def test_training_integration(monkeypatch):
    import train

    got_params, got_losses = train.fit(seed=11, epochs=2)
    monkeypatch.setattr(train, "AdamW", canonical.AdamW)
    monkeypatch.setattr(train, "normalized_weight_decay", canonical.normalized_weight_decay)
    want_params, want_losses = train.fit(seed=11, epochs=2)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-9, atol=1e-12)
    for name in want_params:
        np.testing.assert_allclose(got_params[name], want_params[name], rtol=1e-9, atol=1e-12)

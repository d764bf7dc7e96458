"""Differential tests: rl/gae.py against the reference canonical.py under fixed seeds."""
import numpy as np
import pytest

from rl import canonical as reference
from rl import gae as target


def random_rollout(seed, shape, p_terminal=0.2):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=shape)
    values = rng.normal(size=shape)
    terminals = (rng.random(shape) < p_terminal).astype(np.float64)
    last_values = rng.normal(size=shape[1:])
    return rewards, values, terminals, last_values


def assert_pair_close(got, want):
    assert isinstance(got, tuple) and len(got) == 2, "compute_gae must return (advantages, returns)"
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == w.shape
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


def test_compute_gae_single_env_equivalence():
    for seed in (0, 1, 2):
        rollout = random_rollout(seed, (25,))
        for gamma, lam in [(0.99, 0.95), (0.9, 0.5)]:
            want = reference.compute_gae(*rollout, gamma=gamma, lam=lam)
            got = target.compute_gae(*rollout, gamma=gamma, lam=lam)
            assert_pair_close(got, want)


def test_compute_gae_vectorized_envs_equivalence():
    rollout = random_rollout(10, (16, 5), p_terminal=0.3)
    assert_pair_close(target.compute_gae(*rollout), reference.compute_gae(*rollout))
    assert_pair_close(
        target.compute_gae(*rollout, gamma=0.97, lam=0.8), reference.compute_gae(*rollout, gamma=0.97, lam=0.8)
    )
    # each environment column must be computed independently of the others
    adv_all, _ = target.compute_gae(*rollout)
    rewards, values, terminals, last_values = rollout
    adv_col, _ = reference.compute_gae(rewards[:, 2], values[:, 2], terminals[:, 2], last_values[2])
    np.testing.assert_allclose(np.asarray(adv_all)[:, 2], adv_col, rtol=1e-10, atol=1e-10)


def test_terminations_stop_bootstrapping_equivalence():
    rewards = np.array([1.0, 0.0, 2.0, -1.0, 0.5, 3.0])
    values = np.array([0.5, -0.2, 1.0, 0.3, 0.0, 2.0])
    # an episode ends at step 1, two one-step episodes follow (steps 2 and 3), and the rollout
    # itself ends on a terminal step, so the huge bootstrap value must be ignored
    terminals = np.array([0, 1, 1, 1, 0, 1], dtype=np.float64)
    last_values = np.array(1e6)
    want = reference.compute_gae(rewards, values, terminals, last_values, gamma=0.9, lam=0.8)
    assert_pair_close(target.compute_gae(rewards, values, terminals, last_values, gamma=0.9, lam=0.8), want)
    # the same rollout without the final terminal bootstraps from last_values
    terminals[-1] = 0.0
    want = reference.compute_gae(rewards, values, terminals, last_values, gamma=0.9, lam=0.8)
    assert_pair_close(target.compute_gae(rewards, values, terminals, last_values, gamma=0.9, lam=0.8), want)
    # boolean terminal flags are accepted like floats
    bool_terms = np.array([False, True, False, True, False, False])
    want = reference.compute_gae(rewards, values, bool_terms, 0.7)
    assert_pair_close(target.compute_gae(rewards, values, bool_terms, 0.7), want)


def test_lambda_extremes_equivalence():
    rollout = random_rollout(3, (12, 3), p_terminal=0.25)
    rewards, values, terminals, last_values = rollout
    for gamma, lam in [(0.95, 0.0), (0.95, 1.0), (1.0, 1.0), (1.0, 0.0)]:
        assert_pair_close(
            target.compute_gae(*rollout, gamma=gamma, lam=lam), reference.compute_gae(*rollout, gamma=gamma, lam=lam)
        )
    _, returns_lam1 = target.compute_gae(*rollout, gamma=0.95, lam=1.0)
    np.testing.assert_allclose(
        returns_lam1, reference.discounted_returns(rewards, terminals, last_values, gamma=0.95), rtol=1e-10, atol=1e-10
    )


def test_discounted_returns_equivalence():
    for shape in ((20,), (9, 4)):
        rewards, _, terminals, last_values = random_rollout(7, shape, p_terminal=0.3)
        for gamma in (0.99, 0.5, 1.0):
            got = np.asarray(target.discounted_returns(rewards, terminals, last_values, gamma=gamma))
            want = reference.discounted_returns(rewards, terminals, last_values, gamma=gamma)
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_normalize_advantages_equivalence():
    rng = np.random.default_rng(5)
    for advantages in (rng.normal(3.0, 2.0, size=(8, 3)), rng.normal(size=4), np.array([2.5]), np.full(5, 1.5)):
        got = np.asarray(target.normalize_advantages(advantages))
        want = reference.normalize_advantages(advantages)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    got = np.asarray(target.normalize_advantages(np.array([1.0, 2.0]), eps=0.5))
    np.testing.assert_allclose(got, reference.normalize_advantages(np.array([1.0, 2.0]), eps=0.5), rtol=1e-12)


def test_edge_cases_equivalence():
    # an empty rollout gives empty outputs of the right shape
    empty = (np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(3))
    adv, ret = target.compute_gae(*empty)
    assert np.asarray(adv).shape == (0, 3) and np.asarray(ret).shape == (0, 3)
    # plain Python lists and integer rewards are converted to float64
    lists = ([1, 0, 2], [0.5, 0.25, 1.0], [0, 0, 1], 4.0)
    assert_pair_close(target.compute_gae(*lists, gamma=0.5, lam=0.5), reference.compute_gae(*lists, gamma=0.5, lam=0.5))
    # a single step that does not terminate bootstraps from last_values
    single = (np.array([1.0]), np.array([0.0]), np.array([0.0]), 2.0)
    assert_pair_close(target.compute_gae(*single, gamma=0.5), reference.compute_gae(*single, gamma=0.5))
    # inconsistent shapes are rejected the same way
    bad_inputs = [
        (np.zeros(4), np.zeros(5), np.zeros(4), 0.0),
        (np.zeros((4, 2)), np.zeros((4, 2)), np.zeros((4, 2)), np.zeros(3)),
        (np.zeros((2, 2, 2)), np.zeros((2, 2, 2)), np.zeros((2, 2, 2)), np.zeros((2, 2))),
    ]
    for bad in bad_inputs:
        with pytest.raises(ValueError):
            reference.compute_gae(*bad)
        with pytest.raises(ValueError):
            target.compute_gae(*bad)

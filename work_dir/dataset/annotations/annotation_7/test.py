"""Differential tests: sinkhorn.py against canonical.py under fixed seeds."""
import numpy as np
import pytest

import canonical as reference
import sinkhorn as target

RESULT_FIELDS = ("plan", "f", "g", "cost", "objective", "n_iter", "converged", "marginal_error")


def random_problem(seed, n, m):
    rng = np.random.default_rng(seed)
    a = rng.random(n) + 0.1
    b = rng.random(m) + 0.1
    return a / a.sum(), b / b.sum(), rng.random((n, m))


def assert_results_match(got, want, rtol=1e-7):
    for field in RESULT_FIELDS:
        assert hasattr(got, field), f"SinkhornResult has no field '{field}'"
    assert got.n_iter == want.n_iter
    assert bool(got.converged) == want.converged
    np.testing.assert_allclose(np.asarray(got.plan), want.plan, rtol=rtol, atol=1e-14)
    np.testing.assert_allclose(np.asarray(got.f), want.f, rtol=rtol, atol=1e-10)
    np.testing.assert_allclose(np.asarray(got.g), want.g, rtol=rtol, atol=1e-10)
    assert got.cost == pytest.approx(want.cost, rel=rtol, abs=1e-12)
    assert got.objective == pytest.approx(want.objective, rel=rtol, abs=1e-12)
    assert got.marginal_error == pytest.approx(want.marginal_error, rel=1e-3, abs=1e-15)


def test_logsumexp_equivalence():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 5)) * 50.0
    for axis in (0, 1, None):
        got = np.asarray(target.logsumexp(x, axis=axis))
        want = reference.logsumexp(x, axis=axis)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
    huge = np.array([[1000.0, 1000.0], [-1000.0, -2000.0]])
    np.testing.assert_allclose(np.asarray(target.logsumexp(huge, axis=1)), reference.logsumexp(huge, axis=1), rtol=1e-12)
    with_inf = np.array([[-np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf]])
    got = np.asarray(target.logsumexp(with_inf, axis=1))
    assert not np.any(np.isnan(got))
    np.testing.assert_allclose(got, reference.logsumexp(with_inf, axis=1), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(target.logsumexp(x)), reference.logsumexp(x), rtol=1e-12)


def test_sinkhorn_plan_equivalence():
    for seed, (n, m), epsilon in ((1, (6, 6), 0.1), (2, (7, 4), 0.05), (3, (3, 9), 0.5)):
        a, b, C = random_problem(seed, n, m)
        got = target.sinkhorn_log(a, b, C, epsilon)
        want = reference.sinkhorn_log(a, b, C, epsilon)
        assert_results_match(got, want)
        plan = np.asarray(got.plan)
        assert plan.shape == (n, m)
        np.testing.assert_allclose(plan.sum(axis=1), a, atol=1e-8)
        np.testing.assert_allclose(plan.sum(axis=0), b, atol=1e-12)
    # lists and unnormalised weights of equal total mass are accepted
    a, b, C = [2.0, 1.0, 1.0], [1.0, 3.0], [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]
    assert_results_match(target.sinkhorn_log(a, b, C, 0.2), reference.sinkhorn_log(a, b, C, 0.2))


def test_small_epsilon_log_domain_stability():
    # exp(-C / eps) underflows to 0 here; the log-domain iterations must stay finite and exact
    a, b, C = random_problem(4, 7, 5)
    got = target.sinkhorn_log(a, b, C, 1e-3, max_iter=5000)
    want = reference.sinkhorn_log(a, b, C, 1e-3, max_iter=5000)
    assert np.all(np.isfinite(np.asarray(got.plan)))
    assert_results_match(got, want, rtol=1e-6)
    # a constant added to the cost changes neither the plan nor the iteration count
    shifted_got = target.sinkhorn_log(a, b, C + 10.0, 0.01)
    shifted_want = reference.sinkhorn_log(a, b, C + 10.0, 0.01)
    assert np.all(np.isfinite(np.asarray(shifted_got.plan)))
    assert_results_match(shifted_got, shifted_want, rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(shifted_got.plan), reference.sinkhorn_log(a, b, C, 0.01).plan, rtol=1e-6, atol=1e-14
    )


def test_convergence_flags_equivalence():
    a, b, C = random_problem(5, 6, 6)
    capped = target.sinkhorn_log(a, b, C, 0.01, max_iter=3)
    assert capped.n_iter == 3 and not capped.converged
    assert_results_match(capped, reference.sinkhorn_log(a, b, C, 0.01, max_iter=3))
    loose = target.sinkhorn_log(a, b, C, 0.05, tol=1e-3)
    assert_results_match(loose, reference.sinkhorn_log(a, b, C, 0.05, tol=1e-3))
    tight = target.sinkhorn_log(a, b, C, 0.05, tol=1e-12, max_iter=2000)
    assert tight.converged and tight.n_iter > loose.n_iter
    assert_results_match(tight, reference.sinkhorn_log(a, b, C, 0.05, tol=1e-12, max_iter=2000))


def test_zero_mass_entries_equivalence():
    a = np.array([0.3, 0.0, 0.5, 0.2])
    b = np.array([0.0, 0.6, 0.4])
    C = np.random.default_rng(6).random((4, 3))
    got = target.sinkhorn_log(a, b, C, 0.05)
    want = reference.sinkhorn_log(a, b, C, 0.05)
    plan = np.asarray(got.plan)
    assert not np.any(np.isnan(plan))
    assert np.all(plan[1] == 0.0) and np.all(plan[:, 0] == 0.0)
    assert np.isfinite(got.cost) and np.isfinite(got.objective)
    assert_results_match(got, want)


def test_large_epsilon_limit_equivalence():
    # with a huge regularisation the coupling tends to the independent one, a b^T
    a, b, C = random_problem(7, 5, 4)
    got = target.sinkhorn_log(a, b, C, 1e3)
    want = reference.sinkhorn_log(a, b, C, 1e3)
    assert_results_match(got, want)
    np.testing.assert_allclose(np.asarray(got.plan), np.outer(a, b), rtol=1e-2)
    # a single point on each side: the only coupling puts all mass on it
    single = target.sinkhorn_log([1.0], [1.0], [[3.0]], 0.1)
    assert_results_match(single, reference.sinkhorn_log([1.0], [1.0], [[3.0]], 0.1))


def test_input_validation_equivalence():
    a, b, C = random_problem(8, 3, 2)
    bad_calls = [
        lambda m: m.sinkhorn_log(a, b, C.T, 0.1),
        lambda m: m.sinkhorn_log(a, b * 2.0, C, 0.1),
        lambda m: m.sinkhorn_log(np.array([1.2, -0.2, 0.0]), b, C, 0.1),
        lambda m: m.sinkhorn_log(a, b, C, 0.0),
        lambda m: m.sinkhorn_log(a, b, C, -1.0),
        lambda m: m.sinkhorn_log(a, b, C, 0.1, max_iter=0),
        lambda m: m.sinkhorn_log(a[:, None], b, C, 0.1),
        lambda m: m.sinkhorn_log(a, b, np.where(C == C.max(), np.nan, C), 0.1),
        lambda m: m.sinkhorn_log(np.array([]), np.array([]), np.zeros((0, 0)), 0.1),
    ]
    for call in bad_calls:
        with pytest.raises(ValueError):
            call(reference)
        with pytest.raises(ValueError):
            call(target)

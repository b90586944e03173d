"""PATE's data-dependent analysis: reference values, properties of the bounds, the summary, bad inputs.

Reference values were computed with tensorflow/privacy ``research/pate_2018/core.py`` and
``pate_stab/privacy/pate/smooth_sensitivity.py`` at commit 03035d5d4a271ac795dab80f5bc1cef82fc3d462 (numpy 2.4.6,
scipy 1.17.1), run outside this repository on the histograms below:
``core.compute_logq_gaussian`` + ``core.rdp_gaussian`` (GNMax), ``core.compute_logpr_answered`` +
``core.compute_rdp_threshold`` (the Confident-GNMax check), ``core.compute_logq_laplace`` +
``core.rdp_pure_eps`` with ``pure_eps = 2/b`` (LNMax), ``core.compute_eps_from_delta`` over the
``ICLR2018/smooth_sensitivity_table.py`` long list of orders (= ``DEFAULT_ORDERS``),
``smooth_sensitivity.compute_logq0_gnmax``, ``compute_local_sensitivity_bounds_gnmax`` /
``_threshold``, ``_compute_rdp_gnmax`` (β_σ) and ``compute_rdp_of_smooth_sensitivity_gaussian``.
Confident-GNMax totals are Σ_all threshold RDP + Σ_answered GNMax RDP. Smooth sensitivities are
max_d e^{−βd} Σ_queries running-max(LS_query)[d] built from the reference's LS arrays (the
reference's scripts sum the arrays without the running maximum; see the module docstring).
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pate_stab.privacy.pate.data_dependent import (
    confident_gnmax_data_dependent_rdp,
    data_dependent_summary,
    gnmax_data_dependent_rdp,
    lnmax_data_dependent_rdp,
)
from pate_stab.privacy.pate.rdp import (
    DEFAULT_ORDERS,
    gnmax_log_q,
    gnmax_rdp,
    gnmax_rdp_data_independent,
    lnmax_log_q,
    lnmax_rdp,
    lnmax_rdp_data_independent,
    rdp_to_epsilon,
    threshold_log_pr_answered,
    threshold_rdp,
    threshold_rdp_data_independent,
)
from pate_stab.privacy.pate.smooth_sensitivity import (
    check_smooth_sensitivity_conditions,
    gnmax_local_sensitivity,
    gnmax_log_q0,
    gnmax_rdp_smooth,
    gnss_rdp,
    smooth_sensitivity,
    threshold_local_sensitivity,
)

torch.set_num_threads(1)

REL = 1e-6

# Drawn once (numpy default_rng seeds 0 and 1: a plurality share ~ U(0.15, 1), the rest
# Dirichlet, then multinomial) and written out so the pinned values depend on no RNG stream.
SMALL = np.array(  # k = 20 teachers, C = 5 classes; row 6 has a tie for the plurality
    [[0, 0, 3, 6, 11], [0, 4, 0, 16, 0], [0, 10, 5, 2, 3], [3, 0, 15, 1, 1],
     [8, 5, 1, 4, 2], [1, 4, 0, 9, 6], [1, 8, 3, 0, 8], [0, 0, 0, 20, 0]]
)  # fmt: skip
MNIST_LIKE = np.array(  # k = 250 teachers, C = 10 classes, as in the ICLR2018 MNIST / SVHN runs
    [[0, 5, 1, 0, 240, 1, 1, 0, 0, 2], [1, 3, 10, 6, 6, 203, 1, 3, 0, 17],
     [5, 1, 4, 3, 225, 3, 2, 4, 2, 1], [0, 6, 6, 17, 0, 12, 82, 7, 39, 81],
     [18, 1, 67, 7, 22, 8, 94, 1, 12, 20], [28, 105, 3, 7, 2, 8, 5, 45, 12, 35],
     [1, 0, 19, 9, 7, 142, 13, 28, 2, 29], [246, 1, 0, 0, 0, 0, 1, 1, 1, 0],
     [8, 17, 0, 6, 13, 138, 14, 9, 29, 16], [12, 23, 8, 0, 9, 5, 2, 172, 12, 7],
     [6, 31, 16, 2, 4, 5, 6, 14, 143, 23], [37, 57, 10, 26, 18, 3, 74, 17, 8, 0]]
)  # fmt: skip
ANSWERED_MNIST = torch.tensor(MNIST_LIKE.max(axis=1) >= 140)  # a fixed ⊥ pattern: 7 of 12 answered
ANSWERED_SMALL = torch.tensor(SMALL.max(axis=1) >= 12)  # 3 of 8 answered
PIN_ORDERS = [2.0, 5.0, 20.0]


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --------------------------------------------------------------------------- reference values

# (name, RDP at PIN_ORDERS, ε over DEFAULT_ORDERS, its order, δ)
GNMAX_SMALL = ([2.28062766158596, 7.830922071526139, 40.0], 9.0012639109741, 3.5)
GNMAX_MNIST = ([0.010765343948178905, 0.025851679775679162, 0.09652663370819947], 0.4965397731889795, 43.0)
LNMAX_SMALL = ([4.521727087378933, 6.767570605730278, 13.288470044892824], 9.645801971972835, 5.0)
LNMAX_MNIST = ([0.06272835310589642, 0.12444007120218799, 0.3823265345827467], 0.7202610666515001, 52.0)
CONF_MNIST = ([0.00504867728151224, 0.011560013109012496, 0.03935996704153282], 0.3639092846790039, 50.0)
CONF_SVHN = ([0.004815343948178907, 0.010976679775679163, 0.03702663370819949], 0.40363152760535437, 52.5)
CONF_SMALL = ([0.6925185582864523, 3.4137449148462493, 23.888888888888886], 5.511779384294673, 4.0)


def _check_curve(rdp_fn, expected, delta):
    rdp_pinned, eps, order = expected
    assert rdp_fn(PIN_ORDERS) == pytest.approx(rdp_pinned, rel=REL)
    assert rdp_to_epsilon(rdp=rdp_fn(DEFAULT_ORDERS), orders=DEFAULT_ORDERS, delta=delta) == pytest.approx(
        (eps, order), rel=REL
    )


def test_reference_gnmax():
    _check_curve(lambda o: gnmax_data_dependent_rdp(counts=SMALL, sigma=2.0, orders=o), GNMAX_SMALL, 1e-5)
    _check_curve(lambda o: gnmax_data_dependent_rdp(counts=MNIST_LIKE, sigma=40.0, orders=o), GNMAX_MNIST, 1e-5)


def test_reference_lnmax():
    _check_curve(lambda o: lnmax_data_dependent_rdp(counts=SMALL, noise_scale=1.0, orders=o), LNMAX_SMALL, 1e-5)
    _check_curve(lambda o: lnmax_data_dependent_rdp(counts=MNIST_LIKE, noise_scale=20.0, orders=o), LNMAX_MNIST, 1e-5)


@pytest.mark.parametrize(
    ("counts", "answered", "threshold", "sigma1", "sigma2", "delta", "expected"),
    [
        (MNIST_LIKE, ANSWERED_MNIST, 200.0, 150.0, 40.0, 1e-5, CONF_MNIST),  # ICLR2018 MNIST: T, σ1, σ2, δ
        (MNIST_LIKE, ANSWERED_MNIST, 300.0, 200.0, 40.0, 1e-6, CONF_SVHN),  # ICLR2018 SVHN: T, σ1, σ2, δ
        (SMALL, ANSWERED_SMALL, 15.0, 3.0, 2.0, 1e-5, CONF_SMALL),  # the check's data-dependent bound applies
    ],
)
def test_reference_confident_gnmax(counts, answered, threshold, sigma1, sigma2, delta, expected):
    def curve(orders):
        return confident_gnmax_data_dependent_rdp(
            counts=counts, answered=answered, threshold=threshold, sigma1=sigma1, sigma2=sigma2, orders=orders
        )

    _check_curve(curve, expected, delta)


def test_reference_smooth_sensitivity_pieces():
    assert gnmax_log_q0(sigma=40.0, order=20.0) == pytest.approx(-3.1568730493512733, rel=REL)
    assert gnmax_log_q0(sigma=2.0, order=5.0) == pytest.approx(-4.384633206998032, rel=REL)
    assert gnmax_log_q0(sigma=2.0, order=2.0) == pytest.approx(-2.6790479902735385, rel=REL)
    ls = gnmax_local_sensitivity(votes=MNIST_LIKE[0], sigma=40.0, order=20.0)
    assert ls.shape == (251,)
    assert ls[:3] == pytest.approx([1.6221440040976062e-05, 1.7409437433629895e-05, 1.868639422860846e-05], rel=REL)
    ls = gnmax_local_sensitivity(votes=MNIST_LIKE[7], sigma=40.0, order=20.0)
    assert ls[:3] == pytest.approx([1.0622647166648363e-05, 1.1407650895377101e-05, 1.2251812146913687e-05], rel=REL)
    assert gnmax_local_sensitivity(votes=MNIST_LIKE[3], sigma=40.0, order=20.0)[:3].tolist() == [0.0, 0.0, 0.0]
    ls = gnmax_local_sensitivity(votes=SMALL[7], sigma=2.0, order=2.0)
    assert ls[:4] == pytest.approx(
        [8.327536487507775e-08, 1.6051991174012615e-06, 4.040437486236654e-05, 0.0007205077791474922], rel=REL
    )
    ls = gnmax_local_sensitivity(votes=SMALL[1], sigma=2.0, order=2.0)
    assert ls[:4] == pytest.approx(
        [0.008005477757833852, 0.05349871491688943, 0.20331780082066075, 0.35697256168198954], rel=REL
    )
    ls = threshold_local_sensitivity(votes=SMALL[0], threshold=15.0, sigma1=3.0, order=2.0)
    assert ls[:4] == pytest.approx([0.0, 0.04390418890357964, 0.04390418890357964, 0.03299502397723392], rel=REL)
    # ICLR2018 MNIST check (T = 200, σ1 = 150): the data-independent bound is optimal for every count
    assert threshold_local_sensitivity(votes=MNIST_LIKE[4], threshold=200.0, sigma1=150.0, order=20.0).max() == 0.0
    assert gnss_rdp(beta=0.02, ss_sigma=10.0, order=20.0) == pytest.approx(0.2715684156920066, rel=REL)
    assert gnss_rdp(beta=0.2, ss_sigma=5.0, order=2.0) == pytest.approx(1.3240649320283517, rel=REL)


@pytest.mark.parametrize(
    ("kwargs", "raw", "ss", "eps_independent"),
    [
        (
            {"counts": MNIST_LIKE, "aggregator_kind": "gnmax", "sigma": 40.0, "ss_order": 20.0, "ss_sigma": 10.0},
            0.09652663370819947,
            0.002664746798050011,
            0.5952032170505187,
        ),
        (
            {
                "counts": MNIST_LIKE,
                "aggregator_kind": "confident_gnmax",
                "threshold": 200.0,
                "sigma1": 150.0,
                "sigma2": 40.0,
                "answered": ANSWERED_MNIST,
                "ss_order": 20.0,
                "ss_sigma": 10.0,
            },
            0.03935996704153282,
            0.002172511423915735,
            None,
        ),
        (
            {"counts": SMALL, "aggregator_kind": "gnmax", "sigma": 2.0, "ss_order": 2.0, "ss_sigma": 5.0},
            2.28062766158596,
            1.4483565473920335,
            None,
        ),
        (
            {
                "counts": SMALL,
                "aggregator_kind": "confident_gnmax",
                "threshold": 15.0,
                "sigma1": 3.0,
                "sigma2": 2.0,
                "answered": ANSWERED_SMALL,
                "ss_order": 2.0,
                "ss_sigma": 5.0,
            },
            0.6925185582864523,
            0.5126924630056029,
            None,
        ),
    ],
)
def test_reference_summary(kwargs, raw, ss, eps_independent):
    summary = data_dependent_summary(**kwargs, delta=1e-5, generator=_generator())
    assert summary.data_dependent_rdp_at_ss_order == pytest.approx(raw, rel=REL)
    assert summary.smooth_sensitivity == pytest.approx(ss, rel=REL)
    assert summary.ss_beta == pytest.approx(0.4 / kwargs["ss_order"])
    if eps_independent is not None:
        assert summary.data_independent_epsilon == pytest.approx(eps_independent, rel=REL)


def test_docstring_examples():
    assert rdp_to_epsilon(rdp=[1.0], orders=[11.0], delta=1e-5) == pytest.approx((1 + math.log(1e5) / 10, 11.0))
    assert gnmax_log_q(counts=[[10, 0]], sigma=5.0)[0] == pytest.approx(-2.5428, abs=1e-4)
    assert gnmax_rdp_data_independent(sigma=40.0, orders=[20.0]) == pytest.approx([0.0125])
    assert gnmax_rdp(log_q=-50.0, sigma=5.0, orders=[2.0])[0, 0] == pytest.approx(6.146e-21, rel=1e-3)
    assert threshold_log_pr_answered(counts=[[200, 50]], threshold=200.0, sigma1=150.0)[0] == pytest.approx(
        math.log(0.5)
    )
    assert threshold_rdp_data_independent(sigma1=150.0, orders=[20.0])[0] == pytest.approx(20 / (2 * 150.0**2))
    assert threshold_rdp(log_pr_answered=-1e-9, sigma1=150.0, orders=[20.0])[0, 0] == pytest.approx(1.102e-10, rel=1e-3)
    assert lnmax_log_q(counts=[[10, 0]], noise_scale=2.0)[0] == pytest.approx(math.log(7 / (4 * math.exp(5))))
    assert lnmax_rdp_data_independent(noise_scale=20.0, orders=[11.0]) == pytest.approx([0.055])
    assert lnmax_rdp(log_q=-20.0, noise_scale=20.0, orders=[11.0])[0, 0] == pytest.approx(5.709e-10, rel=1e-3)
    assert gnmax_log_q0(sigma=40.0, order=20.0) == pytest.approx(-3.15687, abs=1e-5)
    assert smooth_sensitivity(local_sensitivity=[1.0, 3.0], beta=1.0) == pytest.approx(3 / math.e)
    assert gnss_rdp(beta=0.01, ss_sigma=10.0, order=20.0) == pytest.approx(0.2280, abs=1e-4)


# --------------------------------------------------------------------------- properties

ORDERS = st.sampled_from([1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0])
# (σ, α) pairs for which conditions C5–C6 hold for C ≤ 10 (checked in the test as well)
SS_SETTINGS = st.sampled_from([(2.0, 2.0), (3.0, 2.0), (4.0, 2.0), (6.0, 5.0), (40.0, 20.0)])
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def histograms(draw, max_teachers: int = 30, max_classes: int = 6):
    c = draw(st.integers(2, max_classes))
    row = draw(st.lists(st.integers(0, max_teachers), min_size=c, max_size=c))
    assume(sum(row) >= 1)
    return np.array(row, dtype=np.int64)


def _moves(row: np.ndarray):
    """Every histogram one vote away: −1 in class i, +1 in class j ≠ i."""
    for i in range(row.shape[0]):
        if row[i] == 0:
            continue
        for j in range(row.shape[0]):
            if j != i:
                moved = row.copy()
                moved[i] -= 1
                moved[j] += 1
                yield moved


@FAST
@given(histograms(), st.floats(0.5, 60.0), ORDERS, st.floats(-10.0, 40.0))
def test_data_dependent_never_exceeds_data_independent(row, sigma, order, threshold):
    counts = row[None, :]
    assert gnmax_rdp(log_q=gnmax_log_q(counts=counts, sigma=sigma), sigma=sigma, orders=[order])[0, 0] <= (
        order / sigma**2
    )
    log_p = threshold_log_pr_answered(counts=counts, threshold=threshold, sigma1=sigma)
    assert threshold_rdp(log_pr_answered=log_p, sigma1=sigma, orders=[order])[0, 0] <= order / (2 * sigma**2)
    b = sigma / 4.0
    ln = lnmax_rdp(log_q=lnmax_log_q(counts=counts, noise_scale=b), noise_scale=b, orders=[order])[0, 0]
    assert ln <= lnmax_rdp_data_independent(noise_scale=b, orders=[order])[0]
    assert gnmax_rdp(log_q=gnmax_log_q(counts=counts, sigma=sigma), sigma=sigma, orders=[order])[0, 0] <= (
        gnmax_rdp_smooth(log_q=gnmax_log_q(counts=counts, sigma=sigma), sigma=sigma, order=order)[0] * (1 + 1e-12)
    )


@FAST
@given(histograms(), SS_SETTINGS)
def test_gnmax_local_sensitivity_bounds_every_single_vote_move(row, setting):
    sigma, order = setting
    check_smooth_sensitivity_conditions(sigma=sigma, num_classes=row.shape[0], order=order)
    ls = gnmax_local_sensitivity(votes=row, sigma=sigma, order=order)
    here = gnmax_rdp_smooth(log_q=gnmax_log_q(counts=row[None, :], sigma=sigma), sigma=sigma, order=order)[0]
    for moved in _moves(row):
        there = gnmax_rdp_smooth(log_q=gnmax_log_q(counts=moved[None, :], sigma=sigma), sigma=sigma, order=order)[0]
        assert abs(there - here) <= ls[0] * (1 + 1e-9) + 1e-15
        # a neighbour's own LS is covered by the bound at distance 1
        assert gnmax_local_sensitivity(votes=moved, sigma=sigma, order=order)[0] <= ls[1] * (1 + 1e-9) + 1e-15


@FAST
@given(histograms(), st.floats(0.5, 20.0), st.floats(-5.0, 40.0), ORDERS)
def test_threshold_local_sensitivity_bounds_every_single_vote_move(row, sigma1, threshold, order):
    ls = threshold_local_sensitivity(votes=row, threshold=threshold, sigma1=sigma1, order=order)

    def rdp(r):
        log_p = threshold_log_pr_answered(counts=r[None, :], threshold=threshold, sigma1=sigma1)
        return threshold_rdp(log_pr_answered=log_p, sigma1=sigma1, orders=[order])[0, 0]

    here = rdp(row)
    for moved in _moves(row):
        assert abs(rdp(moved) - here) <= ls[0] * (1 + 1e-9) + 1e-15


@FAST
@given(histograms(), SS_SETTINGS, st.floats(0.001, 0.2))
def test_smooth_sensitivity_at_least_local_sensitivity(row, setting, beta_scale):
    sigma, order = setting
    beta = beta_scale / order
    ls = gnmax_local_sensitivity(votes=row, sigma=sigma, order=order)
    ss = smooth_sensitivity(local_sensitivity=ls, beta=beta)
    assert ss >= ls[0]
    assert ss <= ls.max()


@FAST
@given(histograms(max_classes=5), st.floats(1.0, 30.0), ORDERS)
def test_more_agreement_costs_less(row, sigma, order):
    """Moving a vote into the plurality never increases q or the RDP (GNMax and LNMax)."""
    top = int(row.argmax())
    assume(row.sum() > row[top])
    source = int(np.flatnonzero((row > 0) & (np.arange(row.shape[0]) != top))[0])
    moved = row.copy()
    moved[source] -= 1
    moved[top] += 1
    for log_q_fn, rdp_fn, kw in (
        (gnmax_log_q, gnmax_rdp, {"sigma": sigma}),
        (lnmax_log_q, lnmax_rdp, {"noise_scale": sigma}),
    ):
        key = next(iter(kw))
        before = log_q_fn(counts=row[None, :], **kw)
        after = log_q_fn(counts=moved[None, :], **kw)
        assert after[0] <= before[0] + 1e-12
        assert (
            rdp_fn(log_q=after, orders=[order], **{key: kw[key]})[0, 0]
            <= rdp_fn(log_q=before, orders=[order], **{key: kw[key]})[0, 0] * (1 + 1e-12) + 1e-300
        )


def test_unanimous_cheaper_than_split():
    k, c = 250, 10
    unanimous = np.array([[k] + [0] * (c - 1)])
    split = np.array([[k // 2, k - k // 2] + [0] * (c - 2)])
    for fn, kw in ((gnmax_data_dependent_rdp, {"sigma": 40.0}), (lnmax_data_dependent_rdp, {"noise_scale": 20.0})):
        low = fn(counts=unanimous, orders=DEFAULT_ORDERS, **kw)
        high = fn(counts=split, orders=DEFAULT_ORDERS, **kw)
        assert (low <= high).all() and (low < high).any()
    assert (gnmax_data_dependent_rdp(counts=split, sigma=40.0) == gnmax_rdp_data_independent(sigma=40.0)).all()


# --------------------------------------------------------------------------- summary


def _summary(**overrides):
    kwargs = {
        "aggregator_kind": "confident_gnmax",
        "threshold": 200.0,
        "sigma1": 150.0,
        "sigma2": 40.0,
        "answered": ANSWERED_MNIST,
        "delta": 1e-5,
        "ss_order": 20.0,
        "ss_sigma": 10.0,
        "generator": _generator(),
    }
    kwargs.update(overrides)
    return data_dependent_summary(MNIST_LIKE, **kwargs)


def test_summary_fields_are_consistent():
    s = _summary()
    assert (s.num_queries, s.num_answered, s.num_teachers, s.num_classes) == (12, 7, 250, 10)
    assert s.data_dependent_epsilon == pytest.approx(CONF_MNIST[1], rel=REL)
    assert s.data_dependent_epsilon < s.data_independent_epsilon
    independent = 12 * threshold_rdp_data_independent(sigma1=150.0) + 7 * gnmax_rdp_data_independent(sigma=40.0)
    eps_independent, _ = rdp_to_epsilon(rdp=independent, orders=DEFAULT_ORDERS, delta=1e-5)
    assert s.data_independent_epsilon == pytest.approx(eps_independent)
    assert s.sanitisation_noise_std == pytest.approx(s.ss_sigma * s.smooth_sensitivity)
    assert s.sanitisation_rdp == pytest.approx(gnss_rdp(beta=s.ss_beta, ss_sigma=10.0, order=20.0))
    eps = s.sanitised_rdp + s.sanitisation_rdp + math.log(1e5) / 19.0
    assert s.sanitised_epsilon == pytest.approx(eps)
    assert set(s.to_dict()) >= {"data_dependent_epsilon", "sanitised_epsilon", "smooth_sensitivity"}


def test_summary_noise_is_seeded():
    a, b, c = _summary(generator=_generator(1)), _summary(generator=_generator(1)), _summary(generator=_generator(2))
    assert a == b
    assert a.sanitised_rdp != c.sanitised_rdp
    z = (a.sanitised_rdp - a.data_dependent_rdp_at_ss_order) / a.sanitisation_noise_std
    expected = float(torch.randn((), generator=_generator(1), dtype=torch.float64))
    assert z == pytest.approx(expected)


def test_summary_lnmax_and_improved_conversion():
    s = data_dependent_summary(MNIST_LIKE, aggregator_kind="lnmax", noise_scale=20.0, delta=1e-5)
    assert s.data_dependent_epsilon == pytest.approx(LNMAX_MNIST[1], rel=REL)
    assert s.smooth_sensitivity is None and s.sanitised_epsilon is None
    improved = data_dependent_summary(
        MNIST_LIKE, aggregator_kind="lnmax", noise_scale=20.0, delta=1e-5, conversion="improved"
    )
    assert improved.data_dependent_epsilon < s.data_dependent_epsilon
    assert improved.data_independent_epsilon < s.data_independent_epsilon


def test_summary_refuses_when_conditions_fail():
    # σ = 2, C = 5, α = 5: condition C6 fails (as the reference's symbolic check finds)
    with pytest.raises(ValueError, match="C6"):
        data_dependent_summary(
            SMALL, aggregator_kind="gnmax", sigma=2.0, delta=1e-5, ss_order=5.0, ss_sigma=5.0, generator=_generator()
        )
    with pytest.raises(ValueError, match="C6"):
        check_smooth_sensitivity_conditions(sigma=2.0, num_classes=5, order=5.0)
    check_smooth_sensitivity_conditions(sigma=40.0, num_classes=10, order=20.0)


def test_summary_no_answered_queries():
    s = _summary(answered=torch.zeros(12, dtype=torch.bool))
    assert s.num_answered == 0
    assert s.smooth_sensitivity == 0.0  # the check's data-independent bound is optimal here


# --------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    ("counts", "error", "match"),
    [
        ([[1.0, float("nan")]], ValueError, "NaN"),
        ([1, 2, 3], ValueError, "dimensions"),
        ([[[1, 2]]], ValueError, "dimensions"),
        ([[3, -1]], ValueError, "non-negative"),
        ([[1.5, 0.5]], ValueError, "integer"),
        ([[True, False]], TypeError, "bool"),
        ([[1, 2], [2, 2]], ValueError, "same number of teachers"),
        ([[0, 0]], ValueError, "same number of teachers"),
        ([[3], [3]], ValueError, "2 classes"),
        (np.zeros((0, 3), dtype=np.int64), ValueError, "empty"),
    ],
)
def test_bad_counts(counts, error, match):
    with pytest.raises(error, match=match):
        gnmax_log_q(counts=counts, sigma=1.0)
    with pytest.raises(error, match=match):
        data_dependent_summary(counts, aggregator_kind="lnmax", noise_scale=1.0, delta=1e-5)


def test_integer_valued_float_counts_are_accepted():
    assert gnmax_log_q(counts=[[3.0, 1.0]], sigma=1.0) == pytest.approx(gnmax_log_q(counts=[[3, 1]], sigma=1.0))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_noise_parameters(bad):
    with pytest.raises(ValueError):
        gnmax_log_q(counts=SMALL, sigma=bad)
    with pytest.raises(ValueError):
        gnmax_data_dependent_rdp(counts=SMALL, sigma=bad)
    with pytest.raises(ValueError):
        lnmax_data_dependent_rdp(counts=SMALL, noise_scale=bad)
    with pytest.raises(ValueError):
        threshold_rdp_data_independent(sigma1=bad)
    with pytest.raises(ValueError):
        _summary(sigma1=bad)
    with pytest.raises(ValueError):
        _summary(ss_sigma=bad)


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, float("nan")])
def test_bad_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        _summary(delta=delta)
    with pytest.raises(ValueError, match="delta"):
        rdp_to_epsilon(rdp=[1.0], orders=[2.0], delta=delta)


def test_bad_orders_and_other_arguments():
    with pytest.raises(ValueError, match="orders"):
        gnmax_rdp_data_independent(sigma=1.0, orders=[1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        gnmax_rdp_data_independent(sigma=1.0, orders=[float("nan")])
    with pytest.raises(ValueError, match="same length"):
        rdp_to_epsilon(rdp=[1.0, 2.0], orders=[2.0], delta=1e-5)
    with pytest.raises(ValueError, match="log_q"):
        gnmax_rdp(log_q=0.5, sigma=1.0, orders=[2.0])
    with pytest.raises(ValueError, match="log_q"):
        lnmax_rdp(log_q=float("nan"), noise_scale=1.0, orders=[2.0])
    with pytest.raises(ValueError, match="answered"):
        _summary(answered=torch.ones(3, dtype=torch.bool))
    with pytest.raises(TypeError, match="answered"):
        _summary(answered=torch.ones(12, dtype=torch.int64))
    with pytest.raises(ValueError, match="answered is required"):
        _summary(answered=None)
    with pytest.raises(ValueError, match="aggregator_kind"):
        _summary(aggregator_kind="pate")
    with pytest.raises(ValueError, match="not used"):
        _summary(sigma=3.0)
    with pytest.raises(ValueError, match="not used"):
        data_dependent_summary(SMALL, aggregator_kind="lnmax", noise_scale=1.0, delta=1e-5, ss_order=2.0)
    with pytest.raises(TypeError, match="generator"):
        _summary(generator=0)
    with pytest.raises(ValueError, match="generator is required"):
        _summary(generator=None)
    with pytest.raises(ValueError, match="1/\\(2 beta\\)"):
        _summary(ss_beta=0.03)  # α = 20 needs β < 0.025
    with pytest.raises(ValueError, match="conversion"):
        _summary(conversion="moments")
    with pytest.raises(ValueError, match="beta"):
        smooth_sensitivity(local_sensitivity=[1.0], beta=float("nan"))

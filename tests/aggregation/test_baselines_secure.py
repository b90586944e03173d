"""PATE's aggregators with secure noise: exact output laws, accounting valid for the discrete noise,
secure defaults everywhere, the seeded-noise warning, and replays that never switch noise modes.

Statistical tests decide at α = 1e-6 (chi-square of the sampled outcomes against the exact law).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pate_stab.aggregation import (
    ABSTAIN,
    AGGREGATORS,
    AggregatorSettings,
    BaselineReleaser,
    ConfidentGNMax,
    GNMax,
    LNMax,
    StabilityReleaser,
    compare_aggregators,
    format_table,
    make_releaser,
)
from pate_stab.aggregation.data_dependent import data_dependent_figures
from pate_stab.aggregation.private_knn import NeighbourIndex
from pate_stab.aggregation.registry import aggregator_spec
from pate_stab.errors import ReplayedSpendError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.privacy.noise.secure import (
    SEEDED_NOISE_WARNING,
    SeededRandomSource,
    discrete_gaussian_pmf,
    discrete_laplace_pmf,
    exact_laplace_parameter,
)
from pate_stab.privacy.pate.rdp import gnmax_log_q_discrete, threshold_log_q_discrete
from pate_stab.rng import seeded_generator
from pate_stab.run.report import noise_report

ALPHA = 1e-6
DELTA = 1e-5
N = 200_000


# --------------------------------------------------------------------------- exact output laws


def _laws(pmf: np.ndarray, support: np.ndarray):  # type: ignore[no-untyped-def]
    cdf = np.cumsum(pmf)

    def below_or_at(x: np.ndarray) -> np.ndarray:  # P[Z <= x] for integer x
        idx = np.clip(x - support[0], -1, len(support) - 1)
        return np.where(idx < 0, 0.0, cdf[np.maximum(idx, 0)])

    return below_or_at


def exact_argmax_law(counts: list[int], pmf: np.ndarray, support: np.ndarray) -> np.ndarray:
    """P[argmax_c (n_c + Z_c) = i] for i.i.d. integer noise Z_c, ties to the lowest class."""
    cdf = _laws(pmf, support)
    out = np.zeros(len(counts))
    for i, n_i in enumerate(counts):
        level = n_i + support  # the winner's noisy count for each z
        prob = pmf.copy()
        for j, n_j in enumerate(counts):
            if j != i:  # class j must stay strictly below (j < i) or at most level (j > i)
                prob = prob * cdf(level - n_j - (1 if j < i else 0))
        out[i] = prob.sum()
    return out


def _dlap(scale: float) -> tuple[np.ndarray, np.ndarray]:
    support = np.arange(-400, 401)
    return np.array([discrete_laplace_pmf(int(v), scale) for v in support]), support


def _dgauss(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    span = int(math.ceil(40 * sigma)) + 2
    support = np.arange(-span, span + 1)
    return discrete_gaussian_pmf(support, sigma), support


def _chi_square_p(samples: torch.Tensor, outcomes: list[int], probs: np.ndarray) -> float:
    observed = np.array([int((samples == o).sum()) for o in outcomes], dtype=float)
    assert observed.sum() == samples.numel()
    expected = samples.numel() * probs
    return float(stats.chi2.sf(((observed - expected) ** 2 / expected).sum(), df=len(outcomes) - 1))


COUNTS = [5, 3, 0]


@pytest.mark.statistical
def test_lnmax_secure_outputs_follow_the_exact_law():
    """LNMax (b = 2, DLap with a = 1/2) on (5, 3, 0): chi-square against the exact law; b = 1 is rejected."""
    agg = LNMax(noise_scale=2.0, num_queries=1, delta=DELTA, source=SeededRandomSource(1))
    law = exact_argmax_law(COUNTS, *_dlap(2.0))
    assert _chi_square_p(agg.sample(torch.tensor(COUNTS), N), [0, 1, 2], law) > ALPHA
    wrong = LNMax(noise_scale=1.0, num_queries=1, delta=DELTA, source=SeededRandomSource(2))
    assert _chi_square_p(wrong.sample(torch.tensor(COUNTS), N), [0, 1, 2], law) < ALPHA


@pytest.mark.statistical
def test_gnmax_secure_outputs_follow_the_exact_law():
    """GNMax (σ = 2, N_Z(0, 4)) on (5, 3, 0): chi-square against the exact law; σ = 1 is rejected."""
    agg = GNMax(sigma=2.0, num_queries=1, delta=DELTA, source=SeededRandomSource(3))
    law = exact_argmax_law(COUNTS, *_dgauss(2.0))
    assert _chi_square_p(agg.sample(torch.tensor(COUNTS), N), [0, 1, 2], law) > ALPHA
    wrong = GNMax(sigma=1.0, num_queries=1, delta=DELTA, source=SeededRandomSource(4))
    assert _chi_square_p(wrong.sample(torch.tensor(COUNTS), N), [0, 1, 2], law) < ALPHA


@pytest.mark.statistical
def test_confident_gnmax_secure_outputs_follow_the_exact_law():
    """Threshold 6 on the max count 5 with σ1 = 2, answer with σ2 = 3: P[⊥] = P[Z1 <= 0] exactly;
    σ1 = 1 (the check's noise halved) is rejected."""
    pmf1, support1 = _dgauss(2.0)
    p_abstain = float(pmf1[support1 <= 0].sum())
    law = np.concatenate([[p_abstain], (1 - p_abstain) * exact_argmax_law(COUNTS, *_dgauss(3.0))])
    outcomes = [ABSTAIN, 0, 1, 2]
    agg = ConfidentGNMax(threshold=6, sigma1=2.0, sigma2=3.0, num_queries=1, delta=DELTA, source=SeededRandomSource(5))
    assert _chi_square_p(agg.sample(torch.tensor(COUNTS), N), outcomes, law) > ALPHA
    wrong = ConfidentGNMax(
        threshold=6, sigma1=1.0, sigma2=3.0, num_queries=1, delta=DELTA, source=SeededRandomSource(6)
    )
    assert _chi_square_p(wrong.sample(torch.tensor(COUNTS), N), outcomes, law) < ALPHA


# --------------------------------------------------------------------------- accounting


def test_discrete_laplace_is_not_bounded_by_the_continuous_laplace_event():
    """Why secure LNMax has its own event: at the same scale, DLap's PLD gives a larger δ(ε) than
    the continuous Laplace event that seeded LNMax uses (more mass at the largest loss)."""
    b = 4.0
    pld = pld_privacy_accountant.PLDAccountant
    cont = pld().compose(dp_event.LaplaceDpEvent(b / 2)).get_delta(0.1)
    disc = pld().compose(dp_event.DiscreteLaplaceDpEvent(1 / b, 2)).get_delta(0.1)
    assert disc > cont


def test_lnmax_secure_event_and_calibration():
    agg = LNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=100)
    a = exact_laplace_parameter(agg.noise_scale)
    assert agg.noise == "secure" and agg.accountant == "pld"
    assert agg.per_query_event().to_dp_event() == dp_event.ComposedDpEvent(
        [dp_event.DiscreteLaplaceDpEvent(float(a), 1)] * 2
    )
    assert agg.certified_epsilon <= 1.0 * (1 + 1e-9)
    assert agg.per_query_pure_epsilon == pytest.approx(2 * float(a)) and 2 * float(a) <= 2 / agg.noise_scale
    assert agg.summary()["noise_parameter_exact"] == f"{a.numerator}/{a.denominator}"
    # two changed teachers: pure (4a)-DP → (8a²)-zCDP (Bun & Steinke 2016, Prop 3.3), RDP only
    two = LNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=100, teachers_changed=2)
    a2 = exact_laplace_parameter(two.noise_scale)
    assert two.accountant == "rdp" and two.per_query_event().to_dp_event(accountant="rdp") == dp_event.ZCDpEvent(
        rho=float(8 * a2 * a2)
    )
    assert two.certified_epsilon <= 1.0 * (1 + 1e-9)
    with pytest.raises(ValueError, match="'rdp'"):
        LNMax(noise_scale=10.0, num_queries=10, delta=DELTA, teachers_changed=2, accountant="pld")


@pytest.mark.parametrize("cls, kwargs", [(GNMax, {}), (ConfidentGNMax, {"threshold": 30.0})])
def test_gaussian_aggregators_secure_use_rdp_accounting(cls, kwargs):
    """CKS20: the discrete Gaussian has the continuous one's RDP, not its PLD: RDP, and PLD refused."""
    agg = cls.calibrate(epsilon=2.0, delta=DELTA, num_queries=200, **kwargs)
    assert agg.noise == "secure" and agg.accountant == "rdp"
    acc = rdp_privacy_accountant.RdpAccountant()
    acc.compose(dp_event.SelfComposedDpEvent(agg.per_query_event().to_dp_event(accountant="rdp"), 200))
    assert agg.certified_epsilon == pytest.approx(acc.get_epsilon(DELTA), rel=1e-12)
    assert agg.certified_epsilon <= 2.0 * (1 + 1e-9)
    seeded = cls.calibrate(epsilon=2.0, delta=DELTA, num_queries=200, noise="seeded", **kwargs)
    assert seeded.accountant == "pld"
    with pytest.raises(ValueError, match="'rdp'"):
        cls.calibrate(epsilon=2.0, delta=DELTA, num_queries=200, accountant="pld", **kwargs)
    fields = agg.summary()
    for name in ("sigma", "sigma1", "sigma2"):
        if name in fields:  # the exact variance sampled, never below σ²
            num, den = (int(v) for v in fields[f"{name}_sq_exact"].split("/"))
            assert num / den >= fields[name] ** 2


def test_bad_noise_mode_is_refused():
    with pytest.raises(ValueError, match="noise"):
        GNMax(sigma=5.0, num_queries=1, delta=DELTA, noise="fast")
    with pytest.raises(TypeError, match="generator"):
        GNMax(sigma=5.0, num_queries=1, delta=DELTA, noise="seeded").release(torch.tensor([[1, 2]]))
    with pytest.raises(TypeError, match="source"):
        GNMax(sigma=5.0, num_queries=1, delta=DELTA, source=object())  # type: ignore[arg-type]


# --------------------------------------------------------------------------- defaults and the warning


def _settings(**kw) -> AggregatorSettings:  # type: ignore[no-untyped-def]
    base = dict(epsilon=1.0, delta=DELTA, num_queries=200, num_teachers=20, max_unstable=5)
    return AggregatorSettings(**{**base, **kw})


def test_every_registered_aggregator_is_secure_by_default():
    assert AggregatorSettings(epsilon=1, delta=DELTA, num_queries=1, num_teachers=1, max_unstable=1).noise == "secure"
    index = NeighbourIndex(torch.zeros(3, 2), torch.tensor([0, 1, 0]), num_classes=2)  # Private-kNN's records
    for name in AGGREGATORS:
        extra = {"neighbours": index} if aggregator_spec(name).votes == "queries" else {}
        summary = make_releaser(name, _settings(epsilon=8.0), generator=None, **extra).summary()
        assert summary["noise"] == "secure" and "noise_warning" not in summary, name


@pytest.mark.parametrize("name", ["lnmax", "gnmax", "confident-gnmax"])
def test_same_published_seed_different_noise_by_default(name):
    """The default draws from the OS: two releases handed the same seeded generator differ."""
    counts = torch.tensor([[10, 10]] * 200)  # a tie on every query: the noise decides each label
    runs = [
        make_releaser(name, _settings(confident_fraction=0.0), generator=seeded_generator(0)).release(counts).labels
        for _ in range(2)
    ]
    assert not torch.equal(runs[0], runs[1])


@pytest.mark.parametrize("name", ["lnmax", "gnmax", "confident-gnmax", "stability"])
def test_seeded_release_says_it_has_no_privacy_against_the_seed(tmp_path, name):
    ledger = PrivacyLedger(tmp_path / "l.jsonl", run_id="t", budget_epsilon=10.0, budget_delta=1e-3)
    rel = make_releaser(name, _settings(noise="seeded"), generator=seeded_generator(0), ledger=ledger, spend_id="x")
    rel.release(torch.tensor([[15, 5]] * 10))
    assert rel.summary()["noise"] == "seeded" and rel.summary()["noise_warning"] == SEEDED_NOISE_WARNING
    assert ledger.entry("x").metadata["noise_warning"] == SEEDED_NOISE_WARNING
    assert noise_report(rel.summary()) == {"noise": "seeded", "warning": SEEDED_NOISE_WARNING}
    assert "seed" in SEEDED_NOISE_WARNING and "NO privacy" in SEEDED_NOISE_WARNING


def test_comparison_table_warns_only_for_seeded_rows():
    preds = torch.randint(0, 3, (50, 40), generator=torch.Generator().manual_seed(0))
    truth = torch.randint(0, 3, (40,), generator=torch.Generator().manual_seed(1))
    kw = dict(num_classes=3, epsilon=1.0, delta=DELTA, max_unstable=2, aggregators=("gnmax",))
    secure = compare_aggregators(preds, truth, **kw)  # type: ignore[arg-type]
    assert secure[0].noise == "secure" and SEEDED_NOISE_WARNING not in format_table(secure)
    seeded = compare_aggregators(preds, truth, generator=torch.Generator().manual_seed(2), noise="seeded", **kw)  # type: ignore[arg-type]
    assert seeded[0].noise == "seeded" and SEEDED_NOISE_WARNING in format_table(seeded)


# --------------------------------------------------------------------------- replay never switches modes


def test_replay_with_the_other_noise_mode_is_refused(tmp_path):
    """A spend drawn with seeded noise must not come back as a secure release (nor the reverse)."""
    ledger = PrivacyLedger(tmp_path / "l.jsonl", run_id="t", budget_epsilon=100.0, budget_delta=1e-2)
    cal = calibrate(epsilon=8.0, delta=DELTA, num_queries=20, max_unstable=2)
    counts = torch.tensor([[900, 0]] * 10)
    StabilityReleaser(cal, noise="seeded", generator=seeded_generator(0), ledger=ledger, spend_id="s").release(counts)
    with pytest.raises(ReplayedSpendError, match="noise='seeded'"):
        StabilityReleaser(cal, ledger=ledger, spend_id="s").release(counts)
    gnmax = GNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=20, noise="seeded")
    BaselineReleaser(gnmax, generator=seeded_generator(0), ledger=ledger, spend_id="b").release(counts)
    secure_gnmax = GNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=20)
    with pytest.raises(ReplayedSpendError, match="noise='seeded'"):
        BaselineReleaser(secure_gnmax, ledger=ledger, spend_id="b").release(counts)
    secure = BaselineReleaser(secure_gnmax, ledger=ledger, spend_id="c")
    secure.release(counts)
    with pytest.raises(ReplayedSpendError, match="noise='secure'"):
        BaselineReleaser(gnmax, generator=seeded_generator(0), ledger=ledger, spend_id="c").release(counts)


# --------------------------------------------------------------------------- data-dependent figures


def _exact_non_plurality(counts: list[int], sigma: float) -> float:
    law = exact_argmax_law(counts, *_dgauss(sigma))
    return float(1 - law[int(np.argmax(counts))])


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(0, 30), min_size=2, max_size=4).filter(lambda c: sum(c) > 0),
    sigma=st.floats(0.5, 8.0),
)
def test_discrete_q_bound_holds(counts, sigma):
    """gnmax_log_q_discrete bounds the exact P[answer ≠ plurality] under N_Z noise (ties to the lowest class)."""
    bound = float(np.exp(gnmax_log_q_discrete(counts=[counts], sigma=sigma)[0]))
    assert _exact_non_plurality(counts, sigma) <= bound * (1 + 1e-9) + 1e-12


@settings(max_examples=40, deadline=None)
@given(top=st.integers(1, 40), threshold=st.floats(0.0, 40.0), sigma1=st.floats(0.5, 10.0))
def test_discrete_threshold_q_bound_holds(top, threshold, sigma1):
    """threshold_log_q_discrete bounds the exact probability of the check's less likely outcome."""
    pmf, support = _dgauss(sigma1)
    p_answer = float(pmf[top + support >= threshold].sum())
    bound = float(np.exp(threshold_log_q_discrete(counts=[[top, 0]], threshold=threshold, sigma1=sigma1)[0]))
    assert min(p_answer, 1 - p_answer) <= bound * (1 + 1e-9) + 1e-12


def test_data_dependent_figures_under_secure_noise():
    counts = torch.tensor([[90, 10, 0]] * 50)
    labels = torch.zeros(50, dtype=torch.int64)
    kw = dict(delta=DELTA, teachers_changed=1, order=10.0, sigma=5.0, generator=torch.Generator().manual_seed(0))
    secure = data_dependent_figures("gnmax", {"sigma": 20.0, "noise": "secure"}, counts, labels, **kw)  # type: ignore[arg-type]
    seeded = data_dependent_figures("gnmax", {"sigma": 20.0, "noise": "seeded"}, counts, labels, **kw)  # type: ignore[arg-type]
    assert secure["epsilon_dd_sanitised"] is None and "raw only" in secure["data_dependent_note"]
    assert 0 < seeded["epsilon_dd_raw"] <= secure["epsilon_dd_raw"] <= secure["epsilon_rdp_data_independent"]
    conf = data_dependent_figures(
        "confident-gnmax", {"sigma1": 40.0, "sigma2": 20.0, "threshold": 60.0, "noise": "secure"}, counts, labels, **kw
    )  # type: ignore[arg-type]
    assert conf["epsilon_dd_raw"] is not None and conf["epsilon_dd_sanitised"] is None
    ln = data_dependent_figures("lnmax", {"noise_scale": 20.0, "noise": "secure"}, counts, labels, **kw)  # type: ignore[arg-type]
    assert ln["epsilon_dd_raw"] is None and "discrete Laplace" in ln["data_dependent_note"]

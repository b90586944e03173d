"""Input fuzzing of the public entry points: bad input → ValueError/TypeError, never NaN, never a release.

Each test draws malformed arguments with hypothesis (NaN, ±inf, empty arrays, wrong dtypes and
shapes, huge values) and requires either a clear ``ValueError``/``TypeError`` or, where the input
is acceptable after all (e.g. huge but valid counts), an output that is finite and well-formed.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pate_stab.aggregation.baselines import GNMax, LNMax
from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.aggregation.soft_labels import SoftLabelReleaser
from pate_stab.aggregation.votes import gamma_histogram, vote_histogram
from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.privacy.mechanisms.sparse_vector import SparseVector
from pate_stab.privacy.noise.secure import discrete_laplace, snapping
from pate_stab.privacy.noise.seeded import exponential, gaussian, laplace

CLEAR = (ValueError, TypeError)
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

BAD_REALS = [math.nan, math.inf, -math.inf, np.float64("nan"), torch.tensor(math.nan), None, "1.0", 1 + 1j, [1.0]]
bad_real = st.sampled_from(BAD_REALS)
bad_positive = st.one_of(bad_real, st.sampled_from([0.0, -1.0, -1e308, -0.0]))
huge = st.sampled_from([1e308, 2.0**63, 10**30])

HARD_CAL = calibrate(epsilon=8, delta=1e-5, num_queries=10_000, max_unstable=3, mode="tight")
SOFT_CAL = calibrate(epsilon=8, delta=1e-5, num_queries=10_000, max_unstable=3, mode="tight", soft_labels=True)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _no_nan(value: torch.Tensor) -> None:
    if value.is_floating_point():
        assert not bool(torch.isnan(value).any()), value


# --------------------------------------------------------------------------- calibrate


@FUZZ
@given(field=st.sampled_from(["epsilon", "delta", "num_queries", "max_unstable", "delta_split"]), value=bad_positive)
def test_calibrate_rejects_bad_arguments(field, value):
    kwargs = dict(epsilon=3.0, delta=1e-5, num_queries=100, max_unstable=5, delta_split=0.5)
    kwargs[field] = value
    with pytest.raises(CLEAR):
        calibrate(**kwargs)


@FUZZ
@given(value=st.one_of(huge, st.sampled_from([1.0, 1.5, 2.0])))
def test_calibrate_rejects_delta_out_of_range(value):
    with pytest.raises(CLEAR):
        calibrate(epsilon=3.0, delta=value, num_queries=100, max_unstable=5)


# --------------------------------------------------------------------------- sparse vector


@FUZZ
@given(field=st.sampled_from(["threshold", "noise_scale", "max_unstable"]), value=bad_real)
def test_sparse_vector_constructor(field, value):
    kwargs = dict(threshold=1.0, noise_scale=1.0, max_unstable=2)
    kwargs[field] = value
    with pytest.raises(CLEAR):
        SparseVector(**kwargs, generator=_gen())


@FUZZ
@given(
    value=st.one_of(
        st.tuples(st.just("one"), bad_real),
        st.tuples(
            st.just("many"),
            st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1).filter(
                lambda xs: not all(map(math.isfinite, xs))
            ),
        ),
    )
)
def test_sparse_vector_queries(value):
    sv = SparseVector(threshold=1.0, noise_scale=1.0, max_unstable=2, generator=_gen())
    kind, arg = value
    with pytest.raises(CLEAR):
        if kind == "many":
            sv.process_many(torch.tensor(arg, dtype=torch.float64))
        else:
            sv.process(arg)
    assert sv.num_seen == 0


def test_sparse_vector_rejects_generator_of_wrong_type():
    with pytest.raises(TypeError):
        SparseVector(threshold=1.0, noise_scale=1.0, max_unstable=2, generator=0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- releasers

bad_counts = st.one_of(
    st.sampled_from(
        [
            torch.tensor([[1.0, math.nan]]),
            torch.tensor([[math.inf, 0.0]]),
            torch.tensor([[1.5, 2.0]]),
            torch.tensor([3, 4]),
            torch.zeros((2, 3, 4), dtype=torch.int64),
            torch.tensor([[True, False]]),
            torch.tensor([[-1, 5]]),
            torch.tensor([[5]]),
            "counts",
            None,
            [[1, 2], [3]],
            torch.tensor([[1 + 1j, 2]]),
            torch.tensor([[2**62, -(2**62)]]),
        ]
    ),
    st.lists(st.lists(st.integers(-(2**70), -1), min_size=2, max_size=2), min_size=1, max_size=3),
)


@FUZZ
@given(counts=bad_counts)
def test_stability_releaser_bad_counts(counts, tmp_path_factory):
    path = tmp_path_factory.mktemp("l") / "ledger.jsonl"
    ledger = PrivacyLedger(path, run_id="t", budget_epsilon=100.0, budget_delta=0.1)
    rel = StabilityReleaser(HARD_CAL, noise="seeded", generator=_gen(), ledger=ledger)
    with pytest.raises(CLEAR):
        rel.release(counts)
    assert rel.queries_seen == 0 and ledger.spent() == (0.0, 0.0)  # nothing released, nothing spent


@FUZZ
@given(big=st.integers(2**40, 2**62), m=st.integers(1, 4))
def test_stability_releaser_huge_valid_counts(big, m):
    counts = torch.tensor([[big, 0, 0]] * m, dtype=torch.int64)
    res = StabilityReleaser(HARD_CAL, noise="seeded", generator=_gen()).release(counts)
    assert res.labels.tolist() == [0] * m  # a unanimous huge vote is stable


def test_stability_releaser_empty_is_refused():
    rel = StabilityReleaser(HARD_CAL, noise="seeded", generator=_gen())
    with pytest.raises(ValueError, match="empty"):
        rel.release(torch.zeros((0, 3), dtype=torch.int64))
    assert rel.queries_seen == 0


def test_stability_releaser_empty_spends_nothing(tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger.jsonl", run_id="t", budget_epsilon=100.0, budget_delta=0.1)
    rel = StabilityReleaser(HARD_CAL, noise="seeded", generator=_gen(), ledger=ledger)
    with pytest.raises(ValueError):
        rel.release(torch.zeros((0, 3), dtype=torch.int64))
    assert ledger.spent() == (0.0, 0.0)


bad_scores = st.sampled_from(
    [
        torch.tensor([[0.5, math.nan]]),
        torch.tensor([[math.inf], [0.2]]),
        torch.tensor([[1.5]]),
        torch.tensor([[-0.1]]),
        torch.tensor([[1, 0]]),
        torch.tensor([0.3, 0.4]),
        torch.zeros((2, 2, 2)),
        torch.tensor([[1e308]]),
        "s",
        None,
    ]
)


@FUZZ
@given(scores=bad_scores)
def test_soft_releaser_bad_scores(scores):
    rel = SoftLabelReleaser(SOFT_CAL, gamma=0.1, noise="seeded", generator=_gen())
    with pytest.raises(CLEAR):
        rel.release(scores)
    assert rel._spend.queries_offered == 0


@FUZZ
@given(gamma=st.one_of(bad_positive, st.sampled_from([0.3, 0.7, 1.5])))
def test_soft_releaser_bad_gamma(gamma):
    with pytest.raises(CLEAR):
        SoftLabelReleaser(SOFT_CAL, gamma=gamma, noise="seeded", generator=_gen())


@pytest.mark.parametrize("gamma", [1e-300, 2.0**-70])
def test_tiny_gamma_is_a_clear_error(gamma):
    with pytest.raises(CLEAR):
        SoftLabelReleaser(SOFT_CAL, gamma=gamma, noise="seeded", generator=_gen())


# --------------------------------------------------------------------------- votes

bad_predictions = st.sampled_from(
    [
        torch.tensor([[0.5, 1.0]]),
        torch.tensor([[0, 3]]),
        torch.tensor([[-1, 0]]),
        torch.tensor([0, 1]),
        torch.tensor([[math.nan]]),
        torch.zeros((1, 2, 2), dtype=torch.int64),
        "p",
        None,
        torch.tensor([[2**62]]),
    ]
)


@FUZZ
@given(predictions=bad_predictions, num_classes=st.one_of(st.just(3), bad_positive, st.sampled_from([0, -3, 2.5])))
def test_vote_histogram_bad_input(predictions, num_classes):
    with pytest.raises(CLEAR):
        vote_histogram(predictions, num_classes)


@FUZZ
@given(scores=bad_scores, gamma=st.one_of(st.just(0.1), bad_positive))
def test_gamma_histogram_bad_input(scores, gamma):
    with pytest.raises(CLEAR):
        gamma_histogram(scores, gamma)


# --------------------------------------------------------------------------- baselines


@FUZZ
@given(counts=bad_counts.filter(lambda c: not (isinstance(c, torch.Tensor) and c.shape == (1, 1))))
def test_baselines_bad_counts(counts):
    # a one-class histogram is accepted by the baselines (the label is constant: nothing leaks)
    for agg in (LNMax(noise_scale=20.0, num_queries=100, delta=1e-5), GNMax(sigma=5.0, num_queries=100, delta=1e-5)):
        with pytest.raises(CLEAR):
            agg.release(counts, generator=_gen())
        assert agg.queries_seen == 0


@FUZZ
@given(value=bad_positive)
def test_baseline_constructors(value):
    with pytest.raises(CLEAR):
        LNMax(noise_scale=value, num_queries=10, delta=1e-5)
    with pytest.raises(CLEAR):
        GNMax(sigma=value, num_queries=10, delta=1e-5)
    with pytest.raises(CLEAR):
        LNMax.calibrate(epsilon=value, delta=1e-5, num_queries=10)


# --------------------------------------------------------------------------- noise samplers


@FUZZ
@given(scale=bad_positive, sampler=st.sampled_from([laplace, exponential, gaussian]))
def test_noise_samplers_bad_scale(scale, sampler):
    with pytest.raises(CLEAR):
        sampler(scale, 3, generator=_gen())


@FUZZ
@given(size=st.sampled_from([-1, 2.5, "3", None, (2, -1), math.nan]), sampler=st.sampled_from([laplace, gaussian]))
def test_noise_samplers_bad_size(size, sampler):
    with pytest.raises(CLEAR):
        sampler(1.0, size, generator=_gen())


@FUZZ
@given(scale=st.floats(1e-300, 1e300))
def test_laplace_never_returns_nan(scale):
    out = laplace(scale, 1000, generator=_gen())
    _no_nan(out)


@FUZZ
@given(scale=bad_positive)
def test_secure_samplers_bad_scale(scale):
    with pytest.raises(CLEAR):
        discrete_laplace(scale, 3)
    with pytest.raises(CLEAR):
        snapping(0.0, noise_scale=scale, bound=10.0, size=3)


# --------------------------------------------------------------------------- ledger


@FUZZ
@given(field=st.sampled_from(["epsilon", "delta"]), value=st.one_of(bad_real, st.sampled_from([-1.0, -1e-300])))
def test_ledger_spend_bad_values(field, value, tmp_path_factory):
    path: Path = tmp_path_factory.mktemp("l") / "ledger.jsonl"
    ledger = PrivacyLedger(path, run_id="t", budget_epsilon=10.0, budget_delta=1e-3)
    kwargs = dict(epsilon=0.1, delta=0.0)
    kwargs[field] = value
    with pytest.raises(CLEAR):
        ledger.spend("id-1", **kwargs)
    assert ledger.spent() == (0.0, 0.0)


@pytest.mark.parametrize(
    "kwargs", [dict(epsilon=1e308, delta=0.0), dict(epsilon=0.1, delta=1.0), dict(epsilon=0.1, delta=0.5)]
)
def test_ledger_spend_huge_values(kwargs, tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger.jsonl", run_id="t", budget_epsilon=10.0, budget_delta=1e-3)
    with pytest.raises(CLEAR + (BudgetExhaustedError,)):
        ledger.spend("id-1", **kwargs)
    assert ledger.spent() == (0.0, 0.0)

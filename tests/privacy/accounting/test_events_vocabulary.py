"""One accounting vocabulary: PATE's aggregators, DP-SGD and the heads spend with privacy/events records."""

from __future__ import annotations

import math

import pytest
import torch
from dp_accounting import dp_event

from pate_stab.aggregation.baseline_releaser import BaselineReleaser
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.direct.dpsgd import dpsgd_epsilon, dpsgd_event, dpsgd_noise_multiplier
from pate_stab.privacy.accounting.composition import accountant_epsilon, implies_guarantee
from pate_stab.privacy.accounting.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    SampledGaussianEvent,
    SelfComposedEvent,
    ZCdpEvent,
    event_from_dict,
)
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger

DELTA = 1e-5


@pytest.mark.parametrize(
    "event",
    [
        SelfComposedEvent(ComposedEvent((GaussianEvent(sigma=3.0), GaussianEvent(sigma=2.0, sensitivity=2**0.5))), 50),
        SelfComposedEvent(LaplaceEvent(noise_scale=4.0, sensitivity=2.0), 10),
        ComposedEvent((DiscreteLaplaceEvent(0.25, 1),) * 2),
        SelfComposedEvent(DiscreteGaussianEvent(sigma=5.0, sensitivity=2**0.5), 7),
        ZCdpEvent(rho=0.01),
        SampledGaussianEvent(noise_multiplier=1.1, sampling_rate=0.01, steps=100),
    ],
)
def test_new_events_survive_a_json_round_trip(event):
    assert event_from_dict(event.to_dict()) == event
    assert isinstance(event.to_dp_event(accountant="rdp"), dp_event.DpEvent)


def test_discrete_gaussian_and_zcdp_are_accounted_with_rdp_only():
    for event in (DiscreteGaussianEvent(sigma=5.0), ZCdpEvent(rho=0.01)):
        with pytest.raises(TypeError, match="RDP"):
            event.to_pld()
        with pytest.raises(TypeError, match="RDP"):
            event.to_dp_event(accountant="pld")
    # the discrete Gaussian's RDP is the continuous one's (CKS20 Prop 5): the same ε from the RDP accountant
    assert accountant_epsilon(DiscreteGaussianEvent(sigma=5.0), delta=DELTA, accountant="rdp") == accountant_epsilon(
        GaussianEvent(sigma=5.0), delta=DELTA, accountant="rdp"
    )


def test_event_conversion_keeps_dp_accountings_unit_sensitivity():
    assert LaplaceEvent(noise_scale=4.0, sensitivity=2.0).to_dp_event() == dp_event.LaplaceDpEvent(2.0)
    assert GaussianEvent(sigma=6.0, sensitivity=3.0).to_dp_event() == dp_event.GaussianDpEvent(2.0)
    sg = SampledGaussianEvent(noise_multiplier=1.1, sampling_rate=0.01, steps=100).to_dp_event()
    assert sg == dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.1)), 100)
    with pytest.raises(ValueError, match="sampling_rate"):
        SampledGaussianEvent(noise_multiplier=1.0, sampling_rate=1.5, steps=1)
    with pytest.raises(ValueError):
        SampledGaussianEvent(noise_multiplier=math.nan, sampling_rate=0.5, steps=1)


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (LNMax, {"noise": "seeded"}),
        (LNMax, {"noise": "secure"}),
        (LNMax, {"noise": "secure", "teachers_changed": 2}),
        (GNMax, {"noise": "seeded"}),
        (GNMax, {"noise": "secure"}),
        (ConfidentGNMax, {"noise": "seeded", "threshold": 30.0}),
        (ConfidentGNMax, {"noise": "secure", "threshold": 30.0, "teachers_changed": 2}),
    ],
)
def test_pate_aggregators_spend_with_their_event(tmp_path, cls, kwargs):
    """The spend records the run's event; it implies the certified (ε, δ), which is its accountant's ε."""
    agg = cls.calibrate(epsilon=2.0, delta=DELTA, num_queries=20, **kwargs)
    event = agg.event()
    assert isinstance(event, PrivacyEvent) and event == SelfComposedEvent(agg.per_query_event(), 20)
    assert agg.certified_epsilon == accountant_epsilon(event, delta=DELTA, accountant=agg.accountant)
    with PrivacyLedger(tmp_path / "ledger.jsonl", budget_epsilon=10.0, budget_delta=1e-3) as ledger:
        gen = torch.Generator().manual_seed(0) if kwargs["noise"] == "seeded" else None
        rel = BaselineReleaser(agg, generator=gen, ledger=ledger, spend_id="run:pate")
        rel.release(torch.tensor([[20, 5, 5]] * 4))
        entry = ledger.entry("run:pate")
        assert entry.event == event
        assert entry.epsilon == agg.certified_epsilon and entry.delta == DELTA
    assert implies_guarantee(event, epsilon=agg.certified_epsilon, delta=DELTA)
    assert not implies_guarantee(event, epsilon=0.5 * agg.certified_epsilon, delta=DELTA)


def test_dpsgd_event_implies_opacus_epsilon():
    """DP-SGD's charge is Opacus's RDP ε; its sampled-Gaussian event implies it (RDP or PLD bound)."""
    q, steps = 256 / 2000, 320
    sigma = dpsgd_noise_multiplier(epsilon=8.0, delta=DELTA, sample_rate=q, steps=steps)
    spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=DELTA)
    event = dpsgd_event(noise_multiplier=sigma, sample_rate=q, steps=steps)
    assert event == SampledGaussianEvent(noise_multiplier=sigma, sampling_rate=q, steps=steps)
    assert implies_guarantee(event, epsilon=spent, delta=DELTA)
    assert not implies_guarantee(event, epsilon=0.8 * spent, delta=DELTA)

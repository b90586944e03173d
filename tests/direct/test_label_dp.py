"""LP-1ST and LP-2ST (Ghazi et al. 2021): every label randomised exactly once, the stage-2 prior from
stage 1 only, the channel correction, and learning from randomised labels."""

from __future__ import annotations

import pytest
import torch

import pate_stab.direct.label_dp as label_dp
from pate_stab.direct.label_dp import channel_corrected_prior, train_alibi, train_lp_1st, train_lp_2st
from pate_stab.privacy.mechanisms.randomized_response import rr_keep_probability
from pate_stab.privacy.noise.discrete import SeededRandomSource
from pate_stab.rng import seeded_generator


def _task(n=3000, c=4, seed=0):
    gen = seeded_generator(seed)
    y = torch.randint(0, c, (n,), generator=gen)
    centres = 4.0 * torch.eye(c, 6)
    x = centres[y] + torch.randn(n, 6, generator=gen)
    return x, y


def test_lp_2st_randomises_each_label_exactly_once(monkeypatch):
    x, y = _task()
    calls = []
    for name in ("randomized_response", "rr_with_prior"):
        real = getattr(label_dp, name)

        def spy(labels, *args, _real=real, _name=name, **kwargs):
            calls.append((_name, labels.clone()))
            return _real(labels, *args, **kwargs)

        monkeypatch.setattr(label_dp, name, spy)
    model = train_lp_2st(x, y, num_classes=4, epsilon=1.0, mean=torch.zeros(6), std=torch.ones(6),
                         generator=seeded_generator(1), source=SeededRandomSource(2))  # fmt: skip
    first, second = model.stages
    assert [name for name, _ in calls] == ["randomized_response", "rr_with_prior"]
    assert torch.equal(calls[0][1], y[first]) and torch.equal(calls[1][1], y[second])
    assert torch.equal(torch.sort(torch.cat([first, second])).values, torch.arange(len(y)))  # disjoint, all once
    assert abs(len(first) - len(second)) <= 1


def test_lp_2st_prior_depends_on_stage_one_outputs_only(monkeypatch):
    """Changing a half-2 label changes nothing of stage 1 and the prior (the same seeds), only its own output."""
    x, y = _task()
    priors = []
    real = label_dp.rr_with_prior

    def spy(labels, prior, *args, **kwargs):
        priors.append(prior.clone())
        return real(labels, prior, *args, **kwargs)

    monkeypatch.setattr(label_dp, "rr_with_prior", spy)
    kwargs = {"num_classes": 4, "epsilon": 1.0, "mean": torch.zeros(6), "std": torch.ones(6)}
    a = train_lp_2st(x, y, generator=seeded_generator(1), source=SeededRandomSource(2), **kwargs)
    i = int(a.stages[1][0])
    y2 = y.clone()
    y2[i] = (y[i] + 1) % 4
    b = train_lp_2st(x, y2, generator=seeded_generator(1), source=SeededRandomSource(2), **kwargs)
    assert torch.equal(priors[0], priors[1])
    assert torch.equal(a.noisy_labels[a.stages[0]], b.noisy_labels[b.stages[0]])


def test_channel_correction_inverts_randomised_response():
    c, epsilon = 5, 1.0
    truth = torch.tensor([[0.7, 0.2, 0.1, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    q = float(rr_keep_probability(epsilon, c))
    noisy = q * truth + (1 - q) / (c - 1) * (1 - truth)
    assert torch.allclose(channel_corrected_prior(noisy, epsilon), truth, atol=1e-12)


@pytest.mark.parametrize("train", [train_lp_1st, train_lp_2st, train_alibi])
def test_learners_learn_from_randomised_labels(train):
    x, y = _task(n=4000)
    xe, ye = _task(n=1000, seed=5)
    extra = {"generator": seeded_generator(3)} if train is train_lp_2st else {}
    model = train(x, y, num_classes=4, epsilon=1.0, mean=torch.zeros(6), std=torch.ones(6),
                  source=SeededRandomSource(4), **extra)  # fmt: skip
    q = float(rr_keep_probability(1.0, 4))
    agree = float((model.noisy_labels == y).double().mean())  # labels were randomised (LP-2ST keeps more)
    assert (0.25 if train is train_alibi else q - 0.05) < agree < 0.99
    assert (model.predict(xe) == ye).double().mean() > 0.9

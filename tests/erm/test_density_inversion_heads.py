from __future__ import annotations

import pytest
import torch

from pate_stab.erm.density import histogram_score, private_histogram, private_histogram_density
from pate_stab.erm.heads import PrivateLinearHead
from pate_stab.erm.inversion import inversion_accuracy, invert_attribute
from pate_stab.erm.validation import stability_constants_histogram

from ._data import classification, regression


def test_histogram_and_private_bin_choice():
    torch.manual_seed(0)  # test data only
    x = torch.distributions.Beta(2.0, 5.0).sample((5000,)).to(torch.float64)
    v = torch.distributions.Beta(2.0, 5.0).sample((2000,)).to(torch.float64)
    g = torch.Generator().manual_seed(1)
    h = private_histogram(x, num_bins=10, epsilon=1.0, generator=g)
    assert h.counts.shape == (10,) and bool((h.counts >= 0).all())
    assert abs(h.total - 5000) < 200
    bins, hist = private_histogram_density(
        x, v, bin_counts=[1, 2, 5, 10, 20], epsilon_train=1.0, epsilon_validation=1.0, delta=0.01, generator=g
    )
    assert bins >= 5  # a single bin is far from Beta(2, 5)
    assert histogram_score(hist, v) > histogram_score(private_histogram(x, num_bins=1, epsilon=1.0, generator=g), v)
    with pytest.raises(ValueError, match="range"):
        private_histogram(torch.tensor([0.5, 1.5]), num_bins=2, epsilon=1.0, generator=g)


def test_histogram_training_stability_thm6():
    """Same noise, one record moved: |dq| <= beta1 / n (Thm 6)."""
    torch.manual_seed(1)
    n, k = 2000, 3
    x = torch.rand(n, dtype=torch.float64)
    v = torch.rand(500, dtype=torch.float64)
    for seed in range(10):
        x2 = x.clone()
        x2[seed] = (x[seed] + 0.5) % 1.0
        for bins in (5, 10, 20):
            h1 = private_histogram(x, num_bins=bins, epsilon=1.0, generator=torch.Generator().manual_seed(seed))
            h2 = private_histogram(x2, num_bins=bins, epsilon=1.0, generator=torch.Generator().manual_seed(seed))
            b1, _ = stability_constants_histogram(h_min=1 / 20, num_params=k, delta=0.01, epsilon_train=1.0, n=n)
            assert abs(histogram_score(h1, v) - histogram_score(h2, v)) <= b1 / n


def test_inversion_beats_prior_with_exact_model():
    g = torch.Generator().manual_seed(0)
    n = 2000
    attr = torch.multinomial(torch.tensor([0.5, 0.3, 0.2]), n, replacement=True, generator=g)
    other = torch.rand(n, 2, generator=g, dtype=torch.float64)
    onehot = torch.nn.functional.one_hot(attr, 3).to(torch.float64)
    x = torch.cat([other, onehot], dim=1)
    w = torch.tensor([0.3, -0.2, 0.0, 0.5, 1.0], dtype=torch.float64)
    y = x @ w + 0.05 * torch.randn(n, generator=g, dtype=torch.float64)
    guess = invert_attribute(
        w,
        x,
        y,
        columns=[2, 3, 4],
        encodings=torch.eye(3, dtype=torch.float64),
        prior=torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64),
        sigma=0.05,
    )
    assert inversion_accuracy(guess, attr) > 0.95
    wrong = invert_attribute(
        torch.zeros(5, dtype=torch.float64),
        x,
        y,
        columns=[2, 3, 4],
        encodings=torch.eye(3, dtype=torch.float64),
        prior=torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64),
        sigma=0.05,
    )
    assert inversion_accuracy(wrong, attr) == pytest.approx(float((attr == 0).double().mean()))


def test_private_linear_head_binary_multiclass_regression():
    x, y = classification(2000, 4, seed=3)
    head = PrivateLinearHead(epsilon=2.0, lam=0.01, classes=2).fit(
        x, (y > 0).long(), generator=torch.Generator().manual_seed(0)
    )
    acc = float((head.predict(x) == (y > 0).long()).double().mean())
    assert acc > 0.8
    assert head.predict_proba(x).shape == (2000,)
    labels = torch.randint(0, 3, (300,), generator=torch.Generator().manual_seed(1))
    multi = PrivateLinearHead(epsilon=3.0, lam=0.1, mechanism="objective", classes=3).fit(
        x[:300], labels, generator=torch.Generator().manual_seed(2)
    )
    assert multi.decision_function(x[:5]).shape == (5, 3)
    assert all(m.epsilon == 1.0 for m in multi.models_)
    xr, yr = regression(500, 3, seed=4)
    reg = PrivateLinearHead(epsilon=1.0, lam=0.1, loss="squared", radius=1.0).fit(
        xr, yr, generator=torch.Generator().manual_seed(3)
    )
    assert reg.predict(xr).shape == (500,)
    with pytest.raises(RuntimeError, match="not fitted"):
        PrivateLinearHead(epsilon=1.0, lam=0.1).predict(x)
    with pytest.raises(ValueError, match="mechanism"):
        PrivateLinearHead(epsilon=1.0, lam=0.1, mechanism="x")


def test_private_linear_head_classes_are_declared_never_read_from_the_labels():
    """DESIGN.md fact 11: D has one record of class 2, D′ relabels it 1 (replace-one, the head's
    relation). Read from the labels, the class set would give 3 heads at ε/3 on D and 2 classes (one
    head at ε) on D′; declared, both fit 3 heads at ε/3 with weights of one shape."""
    x, _ = classification(300, 4, seed=5)
    y = torch.randint(0, 2, (300,), generator=torch.Generator().manual_seed(6))
    y[11] = 2
    y_prime = y.clone()
    y_prime[11] = 1
    heads = [
        PrivateLinearHead(epsilon=3.0, lam=0.1, classes=3).fit(x, labels, generator=torch.Generator().manual_seed(7))
        for labels in (y, y_prime)
    ]
    for head in heads:
        assert head.classes_.tolist() == [0, 1, 2]
        assert [m.epsilon for m in head.models_] == [1.0, 1.0, 1.0]
        assert head.decision_function(x[:5]).shape == (5, 3)
    with pytest.raises(ValueError, match="declare the classes"):
        PrivateLinearHead(epsilon=3.0, lam=0.1).fit(x, y, generator=torch.Generator().manual_seed(7))
    with pytest.raises(ValueError, match=r"y\[11\] = 2 is not a declared class \[0, 1\]"):
        PrivateLinearHead(epsilon=3.0, lam=0.1, classes=2).fit(x, y, generator=torch.Generator().manual_seed(7))
    with pytest.raises(ValueError, match="not 'squared'"):
        PrivateLinearHead(epsilon=1.0, lam=0.1, loss="squared", radius=1.0, classes=2)

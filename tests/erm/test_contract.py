from __future__ import annotations

import pytest
import torch

from pate_stab._checks import PrivacyLeakWarning
from pate_stab.erm import objective_perturbation, output_perturbation, scale_to_unit_ball


def _ok():
    return torch.tensor([[0.6, 0.0], [0.0, 0.5]], dtype=torch.float64), torch.tensor([1.0, -1.0])


def test_rows_outside_ball_rejected_then_clipped():
    x, y = _ok()
    x[0, 0] = 3.0
    with pytest.raises(ValueError, match="x: 1 rows have"):
        output_perturbation(x, y, epsilon=1.0, lam=0.1, generator=torch.Generator())
    m = output_perturbation(x, y, epsilon=1.0, lam=0.1, clip=True, generator=torch.Generator())
    assert m.weights.shape == (2,)


def test_nan_and_labels_rejected():
    x, y = _ok()
    x[1, 1] = float("nan")
    with pytest.raises(ValueError, match="x contains NaN"):
        output_perturbation(x, y, epsilon=1.0, lam=0.1, generator=torch.Generator())
    x, y = _ok()
    with pytest.raises(ValueError, match=r"y: labels must be in \{-1, 1\}"):
        objective_perturbation(x, torch.tensor([1.0, 0.0]), epsilon=1.0, lam=0.1, generator=torch.Generator())
    with pytest.raises(ValueError, match="y must have 2 entries"):
        output_perturbation(x, torch.tensor([1.0]), epsilon=1.0, lam=0.1, generator=torch.Generator())


def test_regression_targets_outside_range():
    x, _ = _ok()
    y = torch.tensor([0.5, 1.5])
    with pytest.raises(ValueError, match=r"\|y\| > 1"):
        output_perturbation(x, y, epsilon=1.0, lam=0.1, loss="squared", radius=1.0, generator=torch.Generator())
    output_perturbation(x, y, epsilon=1.0, lam=0.1, loss="squared", radius=1.0, clip=True, generator=torch.Generator())


def test_bound_from_data_warns():
    x = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    with pytest.warns(PrivacyLeakWarning):
        s = scale_to_unit_ball(x)
    assert float(torch.linalg.vector_norm(s, dim=1).max()) == pytest.approx(1.0)
    s = scale_to_unit_ball(x, norm_bound=10.0)
    torch.testing.assert_close(s, x.to(torch.float64) / 10)

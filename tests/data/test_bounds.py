"""Feature scaling takes its bounds from arguments, never from the data (DESIGN.md fact 6)."""

import pytest
import torch

from pate_stab._checks import PrivacyLeakWarning
from pate_stab.data import (
    ADULT_NUMERIC_BOUNDS,
    MAGIC_BOUNDS,
    bounds_from_data,
    load_adult,
    load_magic,
    load_warfarin_iwpc,
    scale_to_bounds,
)

BOUNDS = [(0.0, 10.0), (-1.0, 1.0)]


def test_scaling_uses_the_given_bounds():
    x = torch.tensor([[5.0, 0.0], [10.0, -1.0], [2.5, 0.5]], dtype=torch.float64)
    out = scale_to_bounds(x, bounds=BOUNDS)
    assert torch.equal(out, torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.25, 0.75]], dtype=torch.float64))


def test_a_record_outside_the_bounds_is_clipped_and_never_widens_them():
    x = torch.tensor([[5.0, 0.0], [2.5, 0.5]], dtype=torch.float64)
    outlier = torch.tensor([[1000.0, -7.0]], dtype=torch.float64)
    alone = scale_to_bounds(x, bounds=BOUNDS)
    together = scale_to_bounds(torch.cat([x, outlier]), bounds=BOUNDS)
    # The other records are scaled exactly as without the outlier; the outlier is clipped.
    assert torch.equal(together[:2], alone)
    assert torch.equal(together[2], torch.tensor([1.0, 0.0], dtype=torch.float64))
    # Min-max ranges of the data would have moved with the outlier: the bounds did not.
    assert not torch.equal(scale_to_bounds(torch.cat([x, outlier]), bounds=[(2.5, 1000.0), (-7.0, 0.5)])[:2], alone)


def test_a_record_outside_the_bounds_is_rejected_on_request():
    x = torch.tensor([[5.0, 0.0], [11.0, 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"1 records lie outside the given bounds \(columns \['a'\]\)"):
        scale_to_bounds(x, bounds={"a": (0.0, 10.0), "b": (-1.0, 1.0)}, out_of_bounds="raise")
    scale_to_bounds(x[:1], bounds=BOUNDS, out_of_bounds="raise")  # inside: accepted


@pytest.mark.parametrize(
    ("bounds", "error"),
    [
        ([(0.0, 10.0)], ValueError),  # one pair for two columns
        ([(0.0, 10.0), (1.0, 1.0)], ValueError),  # upper ≤ lower
        ([(0.0, float("nan")), (-1.0, 1.0)], ValueError),
        ([(0.0, 10.0), (-1.0, float("inf"))], ValueError),
        ([(0.0, 10.0), 3.0], TypeError),
    ],
)
def test_bad_bounds_are_rejected(bounds, error):
    with pytest.raises(error):
        scale_to_bounds(torch.zeros(2, 2, dtype=torch.float64), bounds=bounds)


def test_bad_data_and_mode_are_rejected():
    with pytest.raises(ValueError):
        scale_to_bounds(torch.tensor([[float("nan"), 0.0]]), bounds=BOUNDS)
    with pytest.raises(ValueError, match="out_of_bounds"):
        scale_to_bounds(torch.zeros(1, 2), bounds=BOUNDS, out_of_bounds="ignore")  # type: ignore[arg-type]


def test_bounds_from_data_is_an_opt_out_with_a_warning():
    x = torch.tensor([[1.0, 3.0], [2.0, 3.0]], dtype=torch.float64)
    with pytest.warns(PrivacyLeakWarning, match="read from the"):
        bounds = bounds_from_data(x)
    assert bounds == [(1.0, 2.0), (3.0, 4.0)]


def test_public_bounds_fit_the_shared_data_sets(shared_data):
    # the loaders scale with these bounds; every numeric column lies inside them (no clipping:
    # tests/data/test_schema.py encodes the files with out_of_bounds="raise")
    adult = load_adult(shared_data / "adult", norm=None)
    numeric = [adult.feature_names.index(name) for name in ADULT_NUMERIC_BOUNDS]
    assert bool(((adult.x[:, numeric] >= 0) & (adult.x[:, numeric] <= 1)).all())
    magic = load_magic(shared_data / "magic", norm=None)
    assert magic.feature_names == list(MAGIC_BOUNDS)
    assert bool(((magic.x >= 0) & (magic.x <= 1)).all())


def test_warfarin_iwpc_rows_in_the_unit_ball_with_public_ranges(shared_data):
    data = load_warfarin_iwpc(shared_data / "warfarin")
    assert data["x"].shape == (3564, 17) and data["x"].dtype == torch.float64
    assert float(torch.linalg.vector_norm(data["x"], dim=1).max()) <= 1.0
    assert float(data["y"].abs().max()) <= 1.0
    assert torch.equal(data["y"], data["dose"].clamp(max=140.0) / 70.0 - 1.0)
    # Narrower public ranges clip (the rows stay in the ball); they are never widened to fit the data.
    narrow = load_warfarin_iwpc(shared_data / "warfarin", weight_kg=(50.0, 100.0))
    assert float(narrow["x"][:, 3].max()) == pytest.approx(1.0 / 3.0)
    heavy = data["x"][:, 3] * 3.0 * 170.0 + 30.0 > 100.0
    assert bool(heavy.any()) and bool((narrow["x"][heavy, 3] == 1.0 / 3.0).all())

"""Tuned Output Perturbation (Wu et al. 2016, Alg 5) with the R1 / R2 grids: grids, sensitivity, refusals."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.erm.validation import wu_tuning_utilities, wu_utility_sensitivity
from pate_stab.erm.wu_tuned import WU_RADIUS_GRIDS, wu_tuned_grid, wu_tuned_output_perturbation
from pate_stab.rng import seeded_generator

_F64 = torch.float64


def _data(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = seeded_generator(seed)
    x = torch.randn(n, 3, generator=g, dtype=_F64)
    x = x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp_min(1.0)
    y = (x @ torch.tensor([0.5, -0.3, 0.2], dtype=_F64)).clamp(-1, 1)
    return x, y


def test_grids_are_the_printed_ones() -> None:
    assert WU_RADIUS_GRIDS == {"R1": (0.25, 0.5, 1.0), "R2": (0.5, 1.0, 2.0)}
    grid = wu_tuned_grid("R2")
    assert len(grid) == 24 and grid[0] == (0.5, 0.002) and grid[-1] == (2.0, 0.002 * 2**7)
    with pytest.raises(ValueError, match="radii"):
        wu_tuned_grid("R3")


@pytest.mark.parametrize("radii", ["R1", "R2"])
def test_released_model_lies_in_its_ball(radii: str) -> None:
    x, y = _data(500)
    (r, lam), w = wu_tuned_output_perturbation(x, y, epsilon=0.5, generator=seeded_generator(1), radii=radii)
    assert (r, lam) in wu_tuned_grid(radii)
    assert float(torch.linalg.vector_norm(w)) <= r * (1 + 1e-12)


def test_chunk_rate_trains_each_model_on_a_subset_of_its_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    import pate_stab.erm.wu_tuned as wt

    sizes: list[int] = []
    real = wt.rls_out

    def spy(x, y, **kw):  # noqa: ANN001, ANN003, ANN202
        sizes.append(int(x.shape[0]))
        return real(x, y, **kw)

    monkeypatch.setattr(wt, "rls_out", spy)
    x, y = _data(250)  # 25 chunks of 10
    wu_tuned_output_perturbation(x, y, epsilon=1.0, generator=seeded_generator(0), chunk_rate=0.3)
    assert sizes == [3] * 24


def test_printed_sensitivity_refused_on_a_small_validation_chunk_before_training() -> None:
    # 24 models + S': |S'| = 2 < (2 + 1)²/2² = 2.25 for R2, so R² = 4 does not bound (R + 1)²/|S'|.
    x, y = _data(50)
    gen = seeded_generator(0)
    state = gen.get_state()
    with pytest.raises(ValueError, match="printed utility sensitivity"):
        wu_tuned_output_perturbation(x, y, epsilon=1.0, generator=gen, radii="R2", utility="printed")
    assert torch.equal(gen.get_state(), state)  # nothing drawn, nothing trained
    # |S'| = 3 >= 2.25: the printed Δu is a valid bound and is used
    x, y = _data(75)
    wu_tuned_output_perturbation(x, y, epsilon=1.0, generator=gen, radii="R2", utility="printed")


def test_bad_arguments_are_refused() -> None:
    x, y = _data(50)
    with pytest.raises(ValueError, match="utility"):
        wu_tuned_output_perturbation(x, y, epsilon=1.0, generator=seeded_generator(0), utility="sum")
    with pytest.raises(ValueError, match="chunk_rate"):
        wu_tuned_output_perturbation(x, y, epsilon=1.0, generator=seeded_generator(0), chunk_rate=0.0)
    with pytest.raises(ValueError, match="unit"):
        wu_tuned_output_perturbation(3 * x + 1, y, epsilon=1.0, generator=seeded_generator(0))


_val = st.floats(-1.0, 1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    norms=st.lists(st.floats(0.0, 2.0, allow_nan=False), min_size=1, max_size=5),
    size=st.integers(1, 6),
    data=st.data(),
)
def test_utility_sensitivity_bounds_every_replaced_validation_record(norms, size, data) -> None:
    """|u_{S'}(w_i) − u_{S''}(w_i)| <= (max‖w‖ + 1)²/|S'| for S', S'' differing in one record (‖x‖ <= 1, |y| <= 1)."""
    d = 2
    models = []
    for r in norms:
        v = torch.tensor(data.draw(st.lists(_val, min_size=d, max_size=d)), dtype=_F64)
        nv = float(torch.linalg.vector_norm(v))
        models.append(v / nv * r if nv > 0 else v)
    xs = torch.tensor(data.draw(st.lists(st.lists(_val, min_size=d, max_size=d), min_size=size + 1, max_size=size + 1)))
    xs = (xs / torch.linalg.vector_norm(xs, dim=1, keepdim=True).clamp_min(1.0)).to(_F64)
    ys = torch.tensor(data.draw(st.lists(_val, min_size=size + 1, max_size=size + 1)), dtype=_F64)
    u_a = wu_tuning_utilities(models, xs[:size], ys[:size])
    u_b = wu_tuning_utilities(models, torch.cat([xs[: size - 1], xs[size:]]), torch.cat([ys[: size - 1], ys[size:]]))
    assert float((u_a - u_b).abs().max()) <= wu_utility_sensitivity(models, size) * (1 + 1e-12) + 1e-15


def test_printed_r2_sensitivity_is_too_small_on_one_validation_record() -> None:
    """The audit's mutation pair: models ±2 and S' = {(1, ±1)} move u by 8 > R² = 4 (the printed Δu)."""
    models = [torch.tensor([2.0], dtype=_F64), torch.tensor([-2.0], dtype=_F64)]
    x = torch.ones((1, 1), dtype=_F64)
    u_a = wu_tuning_utilities(models, x, torch.ones(1, dtype=_F64))
    u_b = wu_tuning_utilities(models, x, -torch.ones(1, dtype=_F64))
    assert float((u_a - u_b).abs().max()) == 8.0 > 2.0**2
    assert wu_utility_sensitivity(models, 1) == 9.0

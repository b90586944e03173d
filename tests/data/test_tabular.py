import pytest
import torch

from pate_stab.data import (
    load_adult,
    load_kddcup99,
    load_magic,
    load_warfarin,
    project_to_unit_ball,
    standardize,
)


def test_adult(shared_data):
    data = load_adult(shared_data / "adult")
    assert data.x.shape == (32_561 + 16_281, len(data.feature_names))
    assert data.x.norm(dim=1).max() <= 1 + 1e-5
    # 24.08 % of the combined records earn >50K (UCI documentation: 23.93 % / 24.78 % per part)
    assert data.y.float().mean().item() == pytest.approx(0.2393, abs=1e-3)
    assert data.x.shape[1] == 113  # the published schema's width (adult.names), whatever the rows
    signed = load_adult(shared_data / "adult", part="train", label_format="pm1", norm="l1")
    assert set(signed.y.unique().tolist()) == {-1.0, 1.0} and len(signed) == 32_561
    assert len(load_adult(shared_data / "adult", part="test")) == 16_281
    assert signed.x.abs().sum(1).max() <= 1 + 1e-5


def test_magic_and_warfarin(shared_data):
    magic = load_magic(shared_data / "magic")
    assert magic.x.shape == (19_020, 10) and int(magic.y.sum()) == 12_332
    warf = load_warfarin(shared_data / "warfarin")
    assert warf.x.shape[1] == len(warf.feature_names) == 21
    assert warf.y.dtype == torch.float32 and bool((warf.y > 0).all())
    assert bool(torch.isfinite(warf.x).all())


@pytest.mark.slow
def test_kddcup99(shared_data):
    kdd = load_kddcup99(shared_data / "kddcup99")
    assert kdd.x.shape == (494_021, 38)
    assert kdd.x.abs().sum(1).max() <= 1 + 1e-5
    assert int((kdd.y == 0).sum()) == 97_278  # "normal." records in the 10 % file


def test_missing_file_message(tmp_path):
    with pytest.raises(FileNotFoundError, match="adult.data"):
        load_adult(tmp_path)
    with pytest.raises(FileNotFoundError, match="magic04.data"):
        load_magic(tmp_path)


def test_unit_ball_projection_and_standardize():
    x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    out = project_to_unit_ball(x)
    assert torch.allclose(out, torch.tensor([[0.6, 0.8], [0.3, 0.4]]))
    assert torch.allclose(project_to_unit_ball(x, norm="l1")[0], torch.tensor([3 / 7, 4 / 7]))
    z = standardize(x, mean=torch.tensor([1.0, 0.0]), std=torch.tensor([2.0, 0.0]))
    assert torch.allclose(z, torch.tensor([[1.0, 4.0], [-0.35, 0.4]]))

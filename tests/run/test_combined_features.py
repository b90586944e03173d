"""``features: scattering+ssl``: each block extracted as its single feature map (own cache file,
reused across single and combined runs), scaled to public total variance 1, concatenated; the
published cache names depend on public inputs only; config and command line accept it and refuse
CNN teachers with it."""

from __future__ import annotations

import json

import pytest
import torch

import pate_stab.run.data as run_data
import pate_stab.run.features as run_features
from pate_stab.cli.commands import main
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.data import Task
from tests.run.test_features_stage import fake_splits, small

COMBO = "scattering+ssl"


def _cfg(tmp_path, name: str = "run", **kw) -> TransferConfig:
    # ssl_epochs=1: the tiny 8×8 images need no converged encoder; pca_dim=16 reduces both blocks
    base = dict(features=COMBO, ssl_epochs=1, pca_dim=16)
    base.update(kw)
    return small(tmp_path, name, **base)


def _task(tmp_path) -> Task:
    (px, py, ux, uy, ex, ey), _ = fake_splits(small(tmp_path), torch.Generator())
    return Task(px, py, ux, uy, ex, ey, 3, "public-pool")


def _extract(task: Task, cfg: TransferConfig) -> tuple[Task, bool]:
    # the generator as prepare() would seed it for the run: the same state for every extraction
    generator = torch.Generator().manual_seed(7)
    return run_features.extract_features(task, cfg, cfg.run_dir / "features", generator=generator)


def _total_public_variance(x: torch.Tensor) -> float:
    return float(x.to(torch.float64).var(0, unbiased=True).sum())


def test_combined_features_are_the_scaled_concatenation_of_the_single_extractions(tmp_path):
    task = _task(tmp_path)
    # three separate run folders: nothing is shared through a cache
    scat, _ = _extract(task, _cfg(tmp_path, "scat", features="scattering"))
    ssl, _ = _extract(task, _cfg(tmp_path, "ssl", features="ssl"))
    combo, cached = _extract(task, _cfg(tmp_path, "combo"))
    assert cached is False
    s_scat, s_ssl = _total_public_variance(scat.public_x) ** 0.5, _total_public_variance(ssl.public_x) ** 0.5
    assert s_scat > 1.5 and s_ssl > 1.5  # the scaling does change both blocks
    for split in ("private_x", "public_x", "eval_x"):
        expected = torch.cat([getattr(scat, split) / s_scat, getattr(ssl, split) / s_ssl], dim=1)
        got = getattr(combo, split)
        assert got.shape == expected.shape and got.dtype == torch.float32
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    f = combo.feature_map
    assert f["kind"] == f["name"] == COMBO and f["dim"] == 32
    assert [b["name"] for b in f["blocks"]] == ["scattering", "ssl"]
    assert [b["dim"] for b in f["blocks"]] == [16, 16] and [b["columns"] for b in f["blocks"]] == [[0, 16], [16, 32]]
    # the blocks' cache files are named as the single extractions' (same options, same key)
    assert [b["cache"] for b in f["blocks"]] == [scat.feature_map["cache"], ssl.feature_map["cache"]]
    for block, scale in zip(f["blocks"], (s_scat, s_ssl), strict=True):
        assert block["public_total_variance"] == pytest.approx(scale**2, rel=1e-9)
        cols = combo.public_x[:, block["columns"][0] : block["columns"][1]]
        assert _total_public_variance(cols) == pytest.approx(1.0, abs=1e-5)  # each block weighs the same
    json.dumps(f)  # report-ready


def test_both_block_caches_are_written_and_reused(tmp_path, monkeypatch):
    task = _task(tmp_path)
    cfg = _cfg(tmp_path)
    _extract(task, _cfg(tmp_path, features="ssl"))  # a single-feature run in the same folder first
    ssl_files = sorted((cfg.run_dir / "features").glob("ssl_*.pt"))
    assert len(ssl_files) == 1
    built = []
    original = run_features.make_features

    def spy(name, **options):
        built.append(name)
        return original(name, **options)

    monkeypatch.setattr(run_features, "make_features", spy)
    first, cached = _extract(task, cfg)
    assert built == ["scattering"] and cached is False  # the single SSL cache is reused, scattering computed
    files = sorted((cfg.run_dir / "features").glob("*.pt"))
    assert [p.name.split("_")[0] for p in files] == ["scattering", "ssl"] and ssl_files[0] in files
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in files)  # the private records' features
    assert {"features/" + p.name for p in files} == {b["cache"] for b in first.feature_map["blocks"]}

    def no_extractor(*args, **kwargs):
        raise AssertionError("features recomputed although cached")

    monkeypatch.setattr(run_features, "make_features", no_extractor)
    again, cached = _extract(task, cfg)  # rerun: both blocks from their files, no refit
    assert cached is True and again.feature_map == first.feature_map
    assert torch.equal(again.private_x, first.private_x) and torch.equal(again.public_x, first.public_x)


def test_combined_cache_names_do_not_change_with_the_private_rows(tmp_path):
    task = _task(tmp_path)
    cfg = _cfg(tmp_path)
    first, _ = _extract(task, cfg)
    t = task
    neighbour = Task(t.private_x[1:], t.private_y[1:], t.public_x, t.public_y, t.eval_x, t.eval_y, 3, "public-pool")
    second, cached = _extract(neighbour, cfg)
    assert cached is False  # other private inputs: both blocks recomputed, never read from the cache
    assert second.feature_map == first.feature_map  # same published names, dims and scales
    assert second.private_x.shape == (1499, 32)
    torch.testing.assert_close(second.private_x, first.private_x[1:], rtol=0, atol=1e-5)
    assert len(list((cfg.run_dir / "features").glob("*.pt"))) == 2  # rewritten in place, not added


def test_combined_features_end_to_end_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    cfg = _cfg(tmp_path)
    report = run_transfer(cfg)
    f = report["features"]
    assert f == json.loads((cfg.run_dir / "report.json").read_text())["features"]
    assert f["kind"] == COMBO and [b["name"] for b in f["blocks"]] == ["scattering", "ssl"]
    assert all((cfg.run_dir / b["cache"]).is_file() for b in f["blocks"])
    assert report["resumed"]["features"] is False and report["queries"]["answered"] > 0
    teachers = json.loads((cfg.run_dir / "private_diagnostics.json").read_text())["teachers"]
    assert teachers["plurality_accuracy"] > 0.9  # the combined features separate the three templates
    assert run_transfer(cfg)["resumed"]["features"] is True  # rerun: both blocks from the cache


def test_block_scale_refuses_degenerate_blocks():
    with pytest.raises(ValueError, match="ssl block has total public variance 0"):
        run_features.block_scale(torch.ones(5, 3), "ssl")
    with pytest.raises(ValueError, match="at least 2 public rows"):
        run_features.block_scale(torch.ones(1, 3), "scattering")
    assert run_features.block_scale(torch.tensor([[0.0, 0.0], [2.0, 2.0]]), "x") == pytest.approx(2.0)


def test_combined_features_need_images(tmp_path):
    with pytest.raises(ValueError, match=r"features='scattering\+ssl' needs images"):
        run_transfer(_cfg(tmp_path, dim=4))  # the synthetic task's inputs are vectors


def test_config_accepts_the_combination_and_refuses_cnn_teachers_with_it(tmp_path):
    assert _cfg(tmp_path).features == COMBO
    with pytest.raises(ValueError, match="CNN teachers need images; features='scattering\\+ssl'"):
        _cfg(tmp_path, teacher_model="cnn")
    with pytest.raises(ValueError, match="features must be one of .*scattering\\+ssl"):
        _cfg(tmp_path, features="ssl+scattering")
    with pytest.raises(ValueError, match="not one extractor"):
        run_features.extractor_options(_cfg(tmp_path))


def test_command_line_takes_the_combination(tmp_path, capsys):
    base = ["transfer", "--checkpoints-dir", str(tmp_path), "--accelerator", "cpu", "--no-progress",
            "--features", COMBO]  # fmt: skip
    with pytest.raises(SystemExit) as info:
        main([*base, "--teacher-model", "cnn"])
    assert info.value.code == 2 and "CNN teachers need images" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main([*base, "--num-teachers", "300", "--num-queries", "50"])  # accepted; the synthetic data are vectors
    assert info.value.code == 2 and "features='scattering+ssl' needs images" in capsys.readouterr().err

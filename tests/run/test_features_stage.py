"""The run's feature stage and propagation teachers: config checks, scattering features fitted on the
public pool and cached in the run folder (reused on rerun), recorded in the report; propagation
teachers end to end, in transfer and in compare (one set of features and teachers for every row)."""

from __future__ import annotations

import json

import pytest
import torch

import pate_stab.run.data as run_data
import pate_stab.run.features as run_features
from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.aggregation.votes import vote_histogram
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.compare import run_compare
from pate_stab.run.data import Task
from pate_stab.run.prepare import prepare
from pate_stab.run.student import teacher_accuracies
from pate_stab.teachers import PropagationTeachers

VOLATILE = ("wall_time_s", "run", "run_dir", "ledger", "resumed")


def _images(n: int, y: torch.Tensor, g: torch.Generator, templates: torch.Tensor) -> torch.Tensor:
    return templates[y] + 0.3 * torch.randn(n, 1, 8, 8, generator=g)


def fake_splits(config: TransferConfig, generator: torch.Generator) -> tuple[list[torch.Tensor], int]:
    """Three classes of 8×8 images (a fixed template each, plus noise) in place of a data set."""
    g = torch.Generator().manual_seed(123)
    templates = torch.zeros(3, 1, 8, 8)
    templates[0, 0, 1:4, 1:4] = 1.0
    templates[1, 0, 4:7, 4:7] = 1.0
    templates[2, 0, 1:7, 3:5] = 1.0
    out = []
    for n in (1500, 200, 150):  # private, public, evaluation
        y = torch.randint(0, 3, (n,), generator=g)
        out += [_images(n, y, g, templates), y]
    return out, 3


def small(tmp_path, name: str = "run", **kw) -> TransferConfig:
    base = dict(
        run_name=name, checkpoints_dir=str(tmp_path), features="scattering", scattering_j=1, pca_dim=20, whiten=False,
        teacher_model="propagate", graph_neighbors=5, graph_pca_dim=None, graph_steps=10, graph_alpha=0.9,
        num_teachers=300, num_queries=30, epsilon=8.0, max_unstable=10, student_model="logistic", student_epochs=1,
        accelerator="cpu",
    )  # fmt: skip
    base.update(kw)
    return TransferConfig(**base)


def stable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in VOLATILE}


@pytest.fixture()
def images(monkeypatch):
    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("features", "wavelets", "features must be one of"),
        ("teacher_model", "knn", "teacher_model must be one of"),
        ("graph_alpha", 1.0, "graph_alpha"),
        ("graph_alpha", float("nan"), "graph_alpha"),
        ("graph_power", 0.0, "graph_power"),
        ("graph_steps", -1, "graph_steps"),
        ("graph_pca_dim", 0, "graph_pca_dim"),
        ("graph_neighbors", 0, "graph_neighbors"),
        ("scattering_j", 0, "scattering_j"),
        ("ssl_epochs", 0, "ssl_epochs"),
    ],
)
def test_bad_feature_and_graph_values(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        small(tmp_path, **{field: value})


def test_cnn_teachers_refuse_vector_features(tmp_path):
    with pytest.raises(ValueError, match="CNN teachers need images"):
        small(tmp_path, teacher_model="cnn", features="scattering")


def test_scattering_needs_images(tmp_path):
    cfg = small(tmp_path, dim=4)  # the synthetic task's inputs are vectors
    with pytest.raises(ValueError, match="needs images"):
        run_transfer(cfg)


def test_scattering_and_propagation_end_to_end_cached_and_reported(tmp_path, images, monkeypatch):
    cfg = small(tmp_path)
    report = run_transfer(cfg)
    f = report["features"]
    assert f["kind"] == f["name"] == "scattering" and f["dim"] == 20 and f["J"] == 1
    assert f["fitted_on"] == "public pool (200 images)"
    assert f["input_shape"] == [1, 8, 8] and f["scattering_dim"] == 9 * 4 * 4  # J = 1: 1 + 8 channels
    cache = cfg.run_dir / f["cache"]
    assert cache.is_file() and cache.parent == cfg.run_dir / "features"
    assert report["resumed"]["features"] is False
    assert report["teacher_model"]["kind"] == "propagate" and report["teacher_model"]["train"] is None
    teachers = json.loads((cfg.run_dir / "private_diagnostics.json").read_text())["teachers"]
    assert teachers["mean_accuracy"] > 0.5 and teachers["plurality_accuracy"] > 0.9
    assert cache.stat().st_mode & 0o777 == 0o600  # the private records' features
    assert report["queries"]["answered"] > 0 and report["label_accuracy_answered"] > 0.9
    saved = torch.load(cache, weights_only=False)
    assert saved["public"].shape == (200, 20) and saved["private"].shape == (1500, 20)

    def no_extractor(*args, **kwargs):
        raise AssertionError("features recomputed although cached")

    monkeypatch.setattr(run_features, "make_features", no_extractor)
    again = run_transfer(cfg)  # same folder: features, release and report reused
    assert again["resumed"]["features"] is True
    assert stable(again) == stable(report)
    assert json.loads((cfg.run_dir / "report.json").read_text())["features"] == f


def test_features_are_fitted_on_the_public_pool_only(tmp_path, images, monkeypatch):
    seen = []
    original = run_features.make_features

    def spy(name, **options):
        extractor = original(name, **options)
        fit = extractor.fit

        def fit_spy(x):
            seen.append(x.shape[0])
            return fit(x)

        extractor.fit = fit_spy
        return extractor

    monkeypatch.setattr(run_features, "make_features", spy)
    run_transfer(small(tmp_path, stop_after="teachers"))
    assert seen == [200]  # the public pool's 200 images, nothing else


def test_compare_gives_every_row_the_same_features_and_teachers(tmp_path, images):
    cfg = small(tmp_path, name="cmp")
    out = run_compare(cfg, epsilons=[8.0], aggregators=["stability", "gnmax"])
    assert [r["aggregator"] for r in out["rows"]] == ["stability", "gnmax"]
    assert len(list((cfg.run_dir / "features").glob("scattering_*.pt"))) == 1
    prep = prepare(small(tmp_path, name="one"))  # what a transfer run of this config builds
    teacher_mean, plurality = teacher_accuracies(prep.teachers, prep.task.eval_x, prep.task.eval_y, 3)
    teachers = out["private"]["teachers"]
    assert (teachers["mean_accuracy"], teachers["plurality_accuracy"]) == (teacher_mean, plurality)
    assert prep.task.feature_map["cache"] == "features/" + next((cfg.run_dir / "features").glob("*.pt")).name


def test_ssl_features_are_trained_on_the_public_pool_and_cached(tmp_path, images):
    cfg = small(tmp_path, features="ssl", ssl_epochs=1, pca_dim=16, stop_after="teachers")
    run_transfer(cfg)
    files = list((cfg.run_dir / "features").glob("ssl_*.pt"))
    assert len(files) == 1
    saved = torch.load(files[0], weights_only=False)
    assert saved["meta"]["fitted_on"] == "public pool (200 images, no labels)"
    assert saved["public"].shape == (200, 16) and saved["options"]["pca_dim"] == 16
    run_transfer(cfg)  # rerun: the same file (the key includes the generator's state)
    assert list((cfg.run_dir / "features").glob("ssl_*.pt")) == files


def test_selection_reads_propagation_votes_only_of_points_the_releaser_processes_next(tmp_path, images, monkeypatch):
    # seeded noise: with fresh OS noise the releaser may halt after one round, leaving nothing to check
    cfg = small(tmp_path, query_selection="student-confidence", selection_round_size=10, stop_after="release",
                releaser_noise="seeded")  # fmt: skip
    events: list[tuple] = []
    real_votes, real_release = PropagationTeachers.predict_votes, StabilityReleaser.release

    def spy_votes(self, x, **kwargs):
        out = real_votes(self, x, **kwargs)
        events.append(("votes", x.clone(), out))
        return out

    def spy_release(self, counts, **kwargs):
        events.append(("release", counts.clone()))
        return real_release(self, counts, **kwargs)

    monkeypatch.setattr(PropagationTeachers, "predict_votes", spy_votes)
    monkeypatch.setattr(StabilityReleaser, "release", spy_release)
    assert run_transfer(cfg)["status"] == "released"
    monkeypatch.undo()
    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    prep = prepare(cfg)
    position = {tuple(row): i for i, row in enumerate(prep.task.public_x.tolist())}
    assert [e[0] for e in events] == ["votes", "release"] * (len(events) // 2) and len(events) >= 4
    queried: list[int] = []
    for (_, x, votes), (_, counts) in zip(events[::2], events[1::2], strict=True):
        rows = [position[tuple(r)] for r in x.tolist()]  # pool points only
        assert not set(rows) & set(queried)  # each point's votes computed once, just before its release
        assert torch.equal(counts, vote_histogram(votes, 3))
        queried += rows
    assert len(queried) <= cfg.num_queries


def test_feature_cache_is_named_by_public_inputs_and_checks_the_private_ones(tmp_path):
    """The cache file's name is published: it must not change with the private records; a cache
    made from other private records is recomputed, never used."""
    (px, py, ux, uy, ex, ey), _ = fake_splits(small(tmp_path), torch.Generator())
    cfg = small(tmp_path)
    cache_dir = tmp_path / "run" / "features"
    gen = torch.Generator().manual_seed(0)
    task = Task(px, py, ux, uy, ex, ey, 3, "public-pool")
    first, cached = run_features.extract_features(task, cfg, cache_dir, generator=gen)
    assert cached is False
    neighbour = Task(px[1:], py[1:], ux, uy, ex, ey, 3, "public-pool")  # one private record removed
    second, cached = run_features.extract_features(neighbour, cfg, cache_dir, generator=gen)
    assert cached is False  # other private inputs: recomputed
    assert second.feature_map["cache"] == first.feature_map["cache"]  # same published name
    assert second.private_x.shape[0] == 1499 and torch.allclose(second.private_x, first.private_x[1:], atol=1e-5)
    third, cached = run_features.extract_features(neighbour, cfg, cache_dir, generator=gen)
    assert cached is True and torch.equal(third.private_x, second.private_x)


def test_scattering_runs_on_the_runs_gpu(tmp_path, monkeypatch):
    """The feature stage hands the run's accelerator to the scattering transform (the images move to
    it once, the coefficients come back once); the cache key does not depend on the device."""
    import pate_stab.features.extractors as extractors
    import pate_stab.run.features as run_features
    from pate_stab.run.data import load_task

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert run_features.scattering_device(small(tmp_path, accelerator="gpu")) == "cuda"
    assert run_features.scattering_device(small(tmp_path, accelerator="auto")) == "cuda"
    assert run_features.scattering_device(small(tmp_path, accelerator="cpu")) == "cpu"
    assert run_features.features_device(small(tmp_path, accelerator="gpu", features="ssl")) == "cuda"

    made: list[object] = []
    real_make = run_features.make_features

    def make(name, **kwargs):
        made.append(kwargs.get("device"))
        return real_make(name, **{**kwargs, "device": "meta"})  # a device other than the CPU, with no GPU here

    seen: list[tuple[str, int]] = []
    checked: list[torch.Tensor] = []  # the CPU images, as the extractor received them
    real_scattering2d, real_check = extractors.scattering2d, extractors.check_images

    def check_images(name, x, **kw):
        checked.append(x)
        return real_check(name, x, **kw)

    def scattering2d(images, **kw):  # the transform itself on the CPU copy (a meta tensor holds no data)
        seen.append((images.device.type, images.shape[0]))
        return real_scattering2d(checked[-1], **kw)

    monkeypatch.setattr(run_features, "make_features", make)
    monkeypatch.setattr(extractors, "scattering2d", scattering2d)
    monkeypatch.setattr(extractors, "check_images", check_images)
    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    config = small(tmp_path, accelerator="gpu")
    task = load_task(config, generator=torch.Generator().manual_seed(0))
    out, _ = run_features.extract_features(task, config, tmp_path / "run" / "features", generator=torch.Generator())
    assert made == ["cuda"]
    # fit (public), then private, public, evaluation: each set moved whole, once
    assert seen == [("meta", 200), ("meta", 1500), ("meta", 200), ("meta", 150)]
    assert out.private_x.device.type == "cpu" and out.private_x.shape[0] == 1500
    assert "device" not in run_features.extractor_options(config, "scattering")

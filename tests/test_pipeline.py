"""run_transfer end to end: report fields vs the ledger, reproducibility, resume without
retraining or spending twice, label-only threat model, budget errors, baselines."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import pate_stab.pipeline as pipeline
from pate_stab.pipeline import BudgetTooSmallError, TransferConfig, run_transfer
from pate_stab.privacy.ledger import PrivacyLedger

VOLATILE = ("wall_time_s", "run", "run_dir", "ledger", "resumed")


def small(tmp_path, name: str = "run", **kw) -> TransferConfig:
    base = dict(
        run_name=name, checkpoints_dir=str(tmp_path), num_teachers=300, num_private=6000, num_public=400,
        num_eval=300, separation=6.0, num_queries=100, epsilon=8.0, max_unstable=10, teacher_epochs=5, teacher_lr=0.05,
        student_epochs=3, accelerator="cpu",
    )  # fmt: skip
    base.update(kw)
    return TransferConfig(**base)


def stable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in VOLATILE}


def ledger_of(cfg: TransferConfig) -> PrivacyLedger:
    return PrivacyLedger(cfg.run_dir / "ledger.jsonl", budget_epsilon=cfg.epsilon, budget_delta=cfg.delta)


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    cfg = small(tmp_path_factory.mktemp("a"))
    return cfg, run_transfer(cfg)


def test_report_fields_and_ledger_agree(first):
    cfg, report = first
    for key in (
        "dataset",
        "num_teachers",
        "teacher_model",
        "aggregator",
        "calibration",
        "epsilon",
        "delta",
        "queries",
        "label_accuracy_answered",
        "student",
        "teachers",
        "wall_time_s",
        "ledger",
        "threat_model",
    ):
        assert key in report, key  # fmt: skip
    for stage in ("data", "partition", "teachers", "votes", "release", "student", "evaluation"):
        assert report["wall_time_s"][stage] >= 0
    q = report["queries"]
    assert q["answered"] + q["abstained"] == cfg.num_queries and q["answered"] >= 90
    assert 0 <= report["student"]["test_accuracy"] <= 1
    on_disk = json.loads((cfg.run_dir / "report.json").read_text())
    assert on_disk == report
    for name in ("config.json", "ledger.jsonl", "student.pt", "teachers/weights.pt"):
        assert (cfg.run_dir / name).is_file(), name
    with ledger_of(cfg) as ledger:
        entries = ledger.entries()
        assert [e.spend_id for e in entries] == [report["ledger"]["spend_id"]]
        assert entries[0].epsilon == report["epsilon"] <= cfg.epsilon * (1 + 1e-12)
        assert entries[0].delta == report["delta"]
        assert entries[0].mechanism == "stability_hard"
        # the stored release is what the report counts
        labels = entries[0].result["labels"]
        assert sum(v != -1 for v in labels) == q["answered"]
    assert report["ledger"]["spent_basic_composition"]["epsilon"] == report["epsilon"]


def test_same_seed_same_report(first, tmp_path):
    cfg, report = first
    again = run_transfer(replace(cfg, checkpoints_dir=str(tmp_path)))
    assert stable(again) == stable(report)
    other = run_transfer(replace(cfg, checkpoints_dir=str(tmp_path / "s1"), seed=1))
    assert stable(other) != stable(report)


def test_interrupted_after_teachers_resumes_without_retraining_or_double_spend(tmp_path, monkeypatch, first):
    _, reference = first
    cfg = small(tmp_path)
    out = run_transfer(replace(cfg, stop_after="teachers"))
    assert out["status"] == "teachers trained"
    assert (cfg.run_dir / "teachers" / "weights.pt").is_file()
    assert not (cfg.run_dir / "ledger.jsonl").exists()  # nothing spent yet

    def no_training(*args, **kwargs):
        raise AssertionError("teachers were retrained")

    monkeypatch.setattr(pipeline, "train_teachers", no_training)
    out = run_transfer(replace(cfg, stop_after="release"))
    assert out["status"] == "released"
    with ledger_of(cfg) as ledger:
        assert len(ledger.entries()) == 1 and ledger.entries()[0].has_result
        spent = ledger.spent()
    resumed = run_transfer(cfg)
    assert resumed["resumed"] == {"teachers": True, "release": True}
    rerun = run_transfer(cfg)  # a complete run rerun: nothing new either
    with ledger_of(cfg) as ledger:
        assert len(ledger.entries()) == 1
        assert ledger.spent() == spent
    assert stable(resumed) == stable(rerun) == stable(reference)


def test_changed_student_settings_refit_only_the_student(tmp_path, monkeypatch):
    """The student is post-processing: new student settings reuse teachers and releases, spend nothing."""
    cfg = small(tmp_path)
    first_report = run_transfer(cfg)
    with ledger_of(cfg) as ledger:
        entries, spent = ledger.entries(), ledger.spent()

    def no_training(*args, **kwargs):
        raise AssertionError("teachers were retrained")

    monkeypatch.setattr(pipeline, "train_teachers", no_training)
    changed = replace(cfg, student_epochs=1, student_hidden=(8,), bottom="random")
    report = run_transfer(changed)
    assert report["resumed"] == {"teachers": True, "release": True}
    with ledger_of(cfg) as ledger:
        assert ledger.entries() == entries and ledger.spent() == spent
    assert report["queries"] == first_report["queries"]
    assert report["label_accuracy_answered"] == first_report["label_accuracy_answered"]
    saved = json.loads((cfg.run_dir / "config.json").read_text())
    assert saved["student_epochs"] == 1 and saved["bottom"] == "random"
    assert json.loads((cfg.run_dir / "report.json").read_text())["student"] == report["student"]
    assert report["student"]["config"]["epochs"] == 1 and report["student"]["model"]["hidden"] == [8]
    assert report["student"]["bottom"] == "random"


def test_changed_config_in_same_run_dir_is_refused(first):
    cfg, _ = first
    with pytest.raises(ValueError, match="another configuration"):
        run_transfer(replace(cfg, num_teachers=301))


def test_budget_too_small_fails_before_training(tmp_path):
    cfg = small(tmp_path, epsilon=1.0)
    with pytest.raises(BudgetTooSmallError, match=r"needs about k=\d+ teachers.*you have k=300.*ε ≥"):
        run_transfer(cfg)
    assert not (cfg.run_dir / "teachers").exists()


def test_label_only_threat_model(tmp_path):
    cfg = small(tmp_path, threat_model="label-only", label_only_pool=400, num_public=0)
    report = run_transfer(cfg)
    assert report["threat_model"]["name"] == "label-only"
    assert "only labels are private" in report["threat_model"]["description"]
    assert report["sizes"] == {"private": 5600, "public_pool": 400, "evaluation": 300}


@pytest.mark.parametrize("aggregator", ["gnmax", "confident-gnmax"])
def test_baseline_aggregators_spend_through_the_ledger(tmp_path, aggregator):
    cfg = small(tmp_path, aggregator=aggregator, epsilon=2.0, student_epochs=2)
    report = run_transfer(cfg)
    with ledger_of(cfg) as ledger:
        (entry,) = ledger.entries()
    assert entry.epsilon == report["epsilon"] <= 2.0 * (1 + 1e-9)
    assert report["queries"]["seen"] == cfg.num_queries


def test_soft_label_releaser_on_a_binary_task(tmp_path):
    cfg = small(tmp_path, aggregator="stability-soft", num_classes=2, gamma=0.1, num_teachers=600,
                num_private=12000, student_epochs=2)  # fmt: skip
    report = run_transfer(cfg)
    assert report["queries"]["answered"] > 0
    assert report["label_accuracy_answered"] > 0.9
    assert report["calibration"]["soft_labels"] is True


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("teacher_channels", (8,), "teacher_channels must be two positive integers"),
        ("student_channels", (8, 0), "student_channels must be two positive integers"),
        ("teacher_hidden", (0,), "teacher_hidden must be positive integers"),
    ],
)
def test_model_widths_are_checked(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        small(tmp_path, **{field: value})


def test_cnn_widths_reach_the_teachers_and_the_student(tmp_path, monkeypatch):
    """teacher_channels / student_channels are the convolution widths of the specs actually built."""
    built = []
    real = pipeline.ModelSpec

    def spy(*args, **kwargs):
        spec = real(*args, **kwargs)
        built.append(spec)
        return spec

    monkeypatch.setattr(pipeline, "ModelSpec", spy)
    cfg = small(tmp_path, teacher_model="mlp", teacher_channels=(3, 5), student_channels=(7, 9),
                stop_after="release")  # fmt: skip
    run_transfer(cfg)
    assert built[0].channels == (3, 5)
    assert json.loads((cfg.run_dir / "config.json").read_text())["student_channels"] == [7, 9]

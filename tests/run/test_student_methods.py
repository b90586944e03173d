"""Student methods and the "spread" selection in the main job: public inputs only, the spread
student's pseudo-labels, the unlabelled-pool accuracy, a refit that only changes the student, and
compare's repeated releases (one spend each, summarised)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import pate_stab.run.student as run_student
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.compare import run_compare, summarise_rows
from pate_stab.run.prepare import pool_graph, prepare
from pate_stab.student.spreading import spread_labels

REFIT = Path(__file__).resolve().parents[2] / "recipes" / "diagnostics" / "refit_students.py"


def small(tmp_path, name: str = "run", **kw) -> TransferConfig:
    base = dict(
        run_name=name, checkpoints_dir=str(tmp_path), num_teachers=300, num_private=6000, num_public=400,
        num_eval=300, separation=4.0, num_queries=60, epsilon=8.0, max_unstable=10, teacher_epochs=5, teacher_lr=0.05,
        student_epochs=3, accelerator="cpu", query_selection="spread", selection_round_size=10,
        student_method="spread", graph_pca_dim=None, graph_steps=20, graph_alpha=0.99,
    )  # fmt: skip
    base.update(kw)
    return TransferConfig(**base)


@pytest.fixture(scope="module")
def spread_run(tmp_path_factory, trained_teachers):
    cfg = trained_teachers.seed(small(tmp_path_factory.mktemp("spread")))  # session teachers: tests/run/conftest.py
    seen: dict[str, torch.Tensor] = {}
    real = run_student.train_student

    def spy(query_x, released, *, unlabelled_x=None, **kwargs):
        seen["query_x"], seen["targets"], seen["unlabelled_x"] = query_x, released.targets, unlabelled_x
        return real(query_x, released, unlabelled_x=unlabelled_x, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_student, "train_student", spy)
        report = run_transfer(cfg)
    return cfg, report, seen


def test_spread_selection_and_student_report(spread_run):
    cfg, report, _ = spread_run
    assert report["status"] == "complete"
    rounds = report["query_selection"]["rounds"]
    assert rounds[0]["criterion"] == "k-means representatives"
    assert {r["criterion"] for r in rounds[1:]} == {"spread per class"}
    assert report["query_selection"]["coverage"] == cfg.selection_coverage
    student = report["student"]
    assert student["method"] == "spread"
    assert 0.0 <= student["unlabelled_pool_accuracy"] <= 1.0
    assert student["unlabelled_pool_size"] == cfg.num_public - report["queries"]["answered"]


def test_spread_student_trains_on_released_labels_and_confident_spread_labels_of_public_points(spread_run):
    cfg, report, seen = spread_run
    prep = prepare(cfg)
    with PrivacyLedger(cfg.run_dir / "ledger.jsonl", run_id=cfg.run_name, budget_epsilon=cfg.epsilon,
                       budget_delta=cfg.delta) as ledger:  # fmt: skip
        (entry,) = ledger.entries()
    index = torch.tensor(entry.result["selection"]["index"])
    labels = torch.tensor(entry.result["labels"])
    answered = labels != -1
    seeds, released = index[answered], labels[answered]
    position = {tuple(r): i for i, r in enumerate(prep.task.public_x.tolist())}
    rows = [position[tuple(r)] for r in seen["query_x"].tolist()]  # every training input is a pool point
    n_seeds = seeds.numel()
    assert rows[:n_seeds] == seeds.tolist() and torch.equal(seen["targets"][:n_seeds], released)
    # the ⊥ answers spread as an extra class C: points near them get fewer pseudo-labels
    bottoms, c = index[~answered], prep.task.num_classes
    assert bottoms.numel() > 0  # the rule below is exercised with ⊥ present
    graph = pool_graph(prep)
    proba, mass = spread_labels(graph.adjacency, torch.cat([seeds, bottoms]),
                                torch.cat([released, torch.full_like(bottoms, c)]), num_classes=c + 1,
                                alpha=cfg.graph_alpha, steps=cfg.graph_steps)  # fmt: skip
    real, guess = proba[:, :c].max(1)
    extra = torch.tensor(rows[n_seeds:])
    assert not set(extra.tolist()) & (set(seeds.tolist()) | set(bottoms.tolist()))
    assert bool((real[extra] >= cfg.spread_threshold).all())
    assert torch.equal(seen["targets"][n_seeds:], guess[extra])
    keep = (real >= cfg.spread_threshold) & (mass > 0) & (real > proba[:, c])
    keep[seeds] = False
    keep[bottoms] = False
    assert extra.numel() == int(keep.sum()) > n_seeds  # the spread labels far more than was released
    without_bottom, _ = spread_labels(graph.adjacency, seeds, released, num_classes=c, alpha=cfg.graph_alpha,
                                      steps=cfg.graph_steps)  # fmt: skip
    assert int(keep.sum()) < int((without_bottom.max(1).values >= cfg.spread_threshold).sum()) - n_seeds
    unlabelled = [position[tuple(r)] for r in seen["unlabelled_x"].tolist()]
    assert sorted(rows + unlabelled) == list(range(cfg.num_public))  # the whole pool, nothing else


def test_changing_the_student_method_refits_only_the_student(spread_run):
    cfg, report, _ = spread_run
    again = run_transfer(replace(cfg, student_method="supervised"))
    assert again["resumed"]["release"] is True
    assert again["queries"] == report["queries"] and again["student"]["method"] == "supervised"
    with PrivacyLedger(cfg.run_dir / "ledger.jsonl", run_id=cfg.run_name, budget_epsilon=cfg.epsilon,
                       budget_delta=cfg.delta) as ledger:  # fmt: skip
        assert len(ledger.entries()) == 1


def test_fixmatch_needs_images(spread_run):
    cfg, _, _ = spread_run
    with pytest.raises(ValueError, match="image data set"):
        run_transfer(replace(cfg, student_method="fixmatch"))


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("student_method", "magic", "student_method"),
        ("spread_threshold", 1.5, "spread_threshold"),
        ("selection_coverage", -0.1, "selection_coverage"),
        ("fixmatch_steps", 0, "fixmatch_steps"),
        ("fixmatch_preset", "tpu", "fixmatch_preset"),
    ],
)
def test_bad_student_settings(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        small(tmp_path, **{field: value})


def test_compare_repeats_are_separate_spends_and_summarised(tmp_path, trained_teachers):
    cfg = trained_teachers.seed(small(tmp_path, name="rep", student_method="supervised", query_selection="first"))
    out = run_compare(cfg, epsilons=[8.0], aggregators=["stability", "gnmax"], repeats=3)
    rows = out["rows"]
    assert [(r["aggregator"], r["repeat"]) for r in rows] == [
        ("stability", 0), ("gnmax", 0), ("stability", 1), ("gnmax", 1), ("stability", 2), ("gnmax", 2)
    ]  # fmt: skip
    assert len({r["spend_id"] for r in rows}) == 6
    assert out["ledger"]["num_spends"] == 6
    assert out["ledger"]["spent_basic_composition"]["epsilon"] == pytest.approx(sum(r["epsilon"] for r in rows))
    gnmax = [r["student_acc"] for r in rows if r["aggregator"] == "gnmax"]
    (summary,) = [s for s in out["summary"] if s["aggregator"] == "gnmax"]
    assert summary["repeats"] == 3 and summary["student_acc"] == pytest.approx(sum(gnmax) / 3)
    assert summary["student_acc_min"] == min(gnmax) and summary["student_acc_max"] == max(gnmax)
    assert "mean ± sample sd" in out["table"]
    saved = json.loads((cfg.run_dir / "compare.json").read_text())
    assert saved["repeats"] == 3 and len(saved["summary"]) == 2
    # a rerun with the same repeats replays every release: no new spend
    again = run_compare(cfg, epsilons=[8.0], aggregators=["stability", "gnmax"], repeats=3)
    assert [r["reused"] for r in again["rows"]] == [True] * 6
    # recipes/diagnostics/refit_students.py refits the students of every repeat, spending nothing
    before = (cfg.run_dir / "ledger.jsonl").read_text()
    spec = importlib.util.spec_from_file_location("refit_students", REFIT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--run-dir", str(cfg.run_dir), "--aggregators", "gnmax", "--epsilons", "8", "--repeats", "3",
                 "--set", "student_method=spread", "--out", "refit_spread.json"])  # fmt: skip
    assert (cfg.run_dir / "ledger.jsonl").read_text() == before
    refit = json.loads((cfg.run_dir / "refit_spread.json").read_text())
    assert [r["repeat"] for r in refit["rows"]] == [0, 1, 2]
    assert [r["answered"] for r in refit["rows"]] == [r["answered"] for r in rows if r["aggregator"] == "gnmax"]
    assert refit["student"]["student_method"] == "spread" and refit["summary"][0]["repeats"] == 3


def test_summary_of_single_rows_has_zero_spread():
    rows = [{"aggregator": "a", "target_epsilon": 1.0, "epsilon": 1.0, "answered": 5, "label_acc": None,
             "student_acc": 0.5, "student_acc_unlabelled_pool": 0.4}]  # fmt: skip
    (s,) = summarise_rows(rows)
    assert s["student_acc_sd"] == 0.0 and s["label_acc"] is None and s["repeats"] == 1


def test_fixmatch_student_trains_on_the_pool_images_only(tmp_path, monkeypatch):
    import pate_stab.run.data as run_data
    import pate_stab.student as student_pkg
    from tests.run.test_features_stage import fake_splits
    from tests.run.test_features_stage import small as image_run

    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    seen: dict[str, object] = {}
    real = student_pkg.train_fixmatch

    def spy(labelled_x, labels, unlabelled_x, **kwargs):
        seen.update(labelled_x=labelled_x, labels=labels, unlabelled_x=unlabelled_x, config=kwargs["config"])
        return real(labelled_x, labels, unlabelled_x, **kwargs)

    monkeypatch.setattr(student_pkg, "train_fixmatch", spy)
    # LNMax labels every query it is asked, so the student always has labels (a stability release may answer none)
    cfg = image_run(tmp_path, student_method="fixmatch", fixmatch_steps=15, query_selection="spread",
                    selection_round_size=10, aggregator="lnmax")  # fmt: skip
    report = run_transfer(cfg)
    assert report["student"]["method"] == "fixmatch" and seen["config"].steps == 15
    assert 0.0 <= report["student"]["test_accuracy"] <= 1.0
    assert report["student"]["unlabelled_pool_size"] == 200 - report["queries"]["answered"]
    prep = prepare(cfg)
    images = prep.task.public_images
    assert images is not None and images.dim() == 4  # the pool's images, not its scattering features
    with PrivacyLedger(cfg.run_dir / "ledger.jsonl", run_id=cfg.run_name, budget_epsilon=cfg.epsilon,
                       budget_delta=cfg.delta) as ledger:  # fmt: skip
        (entry,) = ledger.entries()
    index, labels = torch.tensor(entry.result["selection"]["index"]), torch.tensor(entry.result["labels"])
    answered = labels != -1
    assert torch.equal(seen["labelled_x"], images[index[answered]]) and torch.equal(seen["labels"], labels[answered])
    rest = torch.ones(images.shape[0], dtype=torch.bool)
    rest[index[answered]] = False
    assert torch.equal(seen["unlabelled_x"], images[rest])  # ⊥ and never-queried pool images

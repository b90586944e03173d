"""``student_select: cv``: the student's settings chosen by cross-validation on the released labels.

Checked here: the choice and the student read no true label of the pool or the evaluation split;
the choice is the argmax of the recorded scores (ties to the first setting); a fold's held-out
queries are hidden from its spread and its training set; the whole is deterministic under a seed;
changing ``student_select`` on a finished run refits the student and spends nothing; bad values
are refused with a message naming them.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from torch import Tensor

import pate_stab.student.select as student_select
from pate_stab.data import make_gaussian_mixture
from pate_stab.rng import seeded_generator
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.data import Task
from pate_stab.run.prepare import Prepared
from pate_stab.run.refit import refit_students
from pate_stab.run.student import fit_student
from pate_stab.student.select import STUDENT_LRS, best_setting, settings_grid

REFIT = Path(__file__).resolve().parents[2] / "recipes" / "diagnostics" / "refit_students.py"


@dataclass
class Released:
    """A release as the student reads it: labels (−1 for ⊥), hard, and their pool positions."""

    labels: Tensor
    soft: bool
    index: Tensor


def _task(public_y: Tensor | None = None, eval_y: Tensor | None = None) -> Task:
    x, y = make_gaussian_mixture(700, num_classes=3, dim=6, separation=2.5, generator=seeded_generator(3))
    return Task(
        private_x=x[:100], private_y=y[:100], public_x=x[100:500],
        public_y=y[100:500] if public_y is None else public_y,
        eval_x=x[500:], eval_y=y[500:] if eval_y is None else eval_y, num_classes=3, threat_model="public-pool",
    )  # fmt: skip


def _release(task: Task) -> Released:
    """90 queries: the pool's first points, a noisy copy of their class (a stand-in for the releaser's
    output, fixed once: the tests below replace the task's true labels, never these), ⊥ every 7th."""
    gen = seeded_generator(11)
    labels = _task().public_y[:90].clone()  # the original truth, whatever ``task`` holds now
    flip = torch.rand(90, generator=gen) < 0.15
    labels[flip] = torch.randint(0, 3, (int(flip.sum()),), generator=gen)
    labels[::7] = -1
    return Released(labels, False, torch.arange(90))


def _prep(tmp_path: Path, task: Task, **kw) -> Prepared:
    settings = dict(
        run_name="sel", checkpoints_dir=str(tmp_path), student_method="spread", student_select="cv",
        student_epochs=4, student_hidden=(16,), graph_neighbors=8, graph_steps=10, accelerator="cpu",
    )  # fmt: skip
    config = TransferConfig(**(settings | kw))
    return Prepared(config, tmp_path / "sel", task, None, None, {}, False, {})


def _fit(prep: Prepared, seed: int = 5):
    release = _release(prep.task)
    return fit_student(prep, release, generator=seeded_generator(seed), bottom_generator=seeded_generator(9))


def _weights(student) -> dict[str, Tensor]:
    return student.network.state_dict()


def _same_student(a, b) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("method", ["spread", "supervised"])
def test_choice_and_student_read_no_true_labels(tmp_path, method):
    task = _task()
    student, _ = _fit(_prep(tmp_path, task, student_method=method))
    gen = seeded_generator(17)
    permuted = replace(task, public_y=task.public_y[torch.randperm(400, generator=gen)],
                       eval_y=torch.randint(0, 3, (200,), generator=gen))  # fmt: skip
    garbage = replace(task, public_y=torch.full((400,), 2), eval_y=torch.zeros(200, dtype=torch.int64))
    for other in (permuted, garbage):
        again, _ = _fit(_prep(tmp_path, other, student_method=method))
        assert again.selection == student.selection
        assert _same_student(again, student)
    assert student.selection["method"] == "cv" and "skipped" not in student.selection


def test_chosen_setting_is_the_argmax_of_the_recorded_scores(tmp_path):
    prep = _prep(tmp_path, _task())
    student, _ = _fit(prep)
    record = student.selection
    assert record["grid"] == settings_grid("spread") and len(record["grid"]) == 9
    assert [len(s) for s in record["fold_scores"]] == [3] * 9
    means = [sum(s) / 3 for s in record["fold_scores"]]
    assert record["mean_scores"] == pytest.approx(means, abs=1e-15)
    best = max(means)
    assert record["chosen"] == record["grid"][means.index(best)]  # the first of the best
    assert student.config.lr == record["chosen"]["student_lr"]  # the final student uses it
    # the held-out folds partition the answered queries (⊥ are never held out)
    assert sum(record["held_out"]) == record["answered"] == int((_release(prep.task).labels >= 0).sum())


def test_ties_go_to_the_first_setting_in_grid_order():
    assert best_setting([0.5, 0.7, 0.7, 0.6]) == 1
    assert best_setting([0.4]) == 0
    with pytest.raises(ValueError, match="finite"):
        best_setting([0.5, float("nan")])


def test_held_out_queries_are_hidden_from_the_spread_and_the_training_set(tmp_path, monkeypatch):
    prep = _prep(tmp_path, _task())
    seen = {}
    real = student_select.train_stacked_students

    def spy(x, groups, **kw):
        seen["groups"] = list(groups)
        return real(x, groups, **kw)

    held_seen: list[Tensor] = []
    real_folds = student_select.stratified_folds

    def folds(classes, k, *, generator):
        fold = real_folds(classes, k, generator=generator)
        held_seen.append(fold)
        return fold

    monkeypatch.setattr(student_select, "train_stacked_students", spy)
    monkeypatch.setattr(student_select, "stratified_folds", folds)
    student, targets = _fit(prep)
    release = _release(prep.task)
    answered_pos = release.index[release.labels >= 0]  # bottom "drop": the targets are the answered queries
    (fold,) = held_seen
    groups = seen["groups"]
    assert len(groups) == 3 * 3  # folds × spread thresholds
    for f in range(3):
        held = answered_pos[fold == f]
        for group in groups[3 * f : 3 * f + 3]:
            assert not torch.isin(held, group.positions).any()  # neither a seed nor a pseudo-label
            kept = answered_pos[fold != f]
            assert torch.isin(kept, group.positions).all()  # the other folds' queries are seeds
        sizes = [g.positions.numel() for g in groups[3 * f : 3 * f + 3]]
        assert sizes == sorted(sizes, reverse=True) and sizes[0] > kept.numel()  # stricter threshold, fewer


def test_deterministic_and_the_same_final_student_as_its_settings_given(tmp_path):
    prep = _prep(tmp_path, _task())
    a, _ = _fit(prep, seed=5)
    b, _ = _fit(prep, seed=5)
    assert a.selection == b.selection and _same_student(a, b)
    chosen = a.selection["chosen"]
    given = replace(prep.config, student_select="none", **chosen)
    plain, _ = _fit(Prepared(given, prep.run_dir, prep.task, None, None, {}, False, {}), seed=5)
    assert plain.selection is None and _same_student(plain, a)  # the selection draws nothing from the student's seed
    other, _ = _fit(prep, seed=6)
    assert other.selection["fold_scores"] != a.selection["fold_scores"] or not _same_student(other, a)


def test_too_few_answered_queries_keep_the_configured_settings(tmp_path):
    prep = _prep(tmp_path, _task(), student_lr=0.02)
    release = Released(torch.tensor([0, -1, 1, -1]), False, torch.arange(4))
    student, _ = fit_student(prep, release, generator=seeded_generator(1), bottom_generator=seeded_generator(2))
    assert student.selection["skipped"].startswith("fewer answered queries than folds")
    assert student.selection["chosen"] == {"spread_threshold": 0.5, "student_lr": 0.02}
    assert student.config.lr == 0.02


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"student_select": "yes"}, "student_select must be one of none, cv, got 'yes'"),
        ({"student_select": "cv", "student_method": "fixmatch"}, "fixed in advance"),
        ({"student_select": "cv", "student_model": "cnn"}, "dense students"),
        ({"student_select": "cv", "pseudo_label_rounds": 1}, "pseudo_label_rounds=1"),
    ],
)
def test_bad_values_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        TransferConfig(**kw)


def test_settings_grid_refuses_fixmatch():
    assert settings_grid("supervised") == [{"student_lr": lr} for lr in STUDENT_LRS]
    with pytest.raises(ValueError, match="not 'fixmatch'"):
        settings_grid("fixmatch")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    cfg = TransferConfig(
        run_name="r", checkpoints_dir=str(tmp_path_factory.mktemp("cv")), num_teachers=300, num_private=6000,
        num_public=400, num_eval=300, separation=4.0, num_queries=100, epsilon=8.0, teacher_epochs=5,
        teacher_lr=0.05, student_epochs=3, student_method="spread", accelerator="cpu",
    )  # fmt: skip
    return cfg, run_transfer(cfg)


def test_changing_student_select_on_a_finished_run_spends_nothing(finished_run):
    cfg, report = finished_run
    assert report["student"]["selection"] is None
    ledger = (cfg.run_dir / "ledger.jsonl").read_text()
    rows, new, spent, _ = refit_students(cfg.run_dir, aggregators=["stability"], epsilons=[8.0],
                                         overrides={"student_select": "cv"})  # fmt: skip
    assert (cfg.run_dir / "ledger.jsonl").read_text() == ledger
    assert new.student_select == "cv" and rows[0]["student_selection"]["method"] == "cv"
    assert rows[0]["answered"] == report["queries"]["answered"]
    # the main job rerun with another student_select: the release is replayed, the student refit
    again = run_transfer(replace(cfg, student_select="cv"))
    assert (cfg.run_dir / "ledger.jsonl").read_text() == ledger
    assert again["resumed"]["release"] is True
    assert again["ledger"]["spent_basic_composition"] == report["ledger"]["spent_basic_composition"]
    assert again["ledger"]["num_spends"] == report["ledger"]["num_spends"] == 1
    assert again["student"]["selection"]["method"] == "cv"
    assert again["student"]["selection"]["answered"] == report["queries"]["answered"]


def test_refit_script_refuses_a_bad_student_select(finished_run):
    cfg, _ = finished_run
    spec = importlib.util.spec_from_file_location("refit_students", REFIT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    before = (cfg.run_dir / "ledger.jsonl").read_text()
    with pytest.raises(SystemExit, match="student_select must be one of none, cv"):
        module.main(["--run-dir", str(cfg.run_dir), "--aggregators", "stability", "--epsilons", "8",
                     "--set", "student_select=maybe", "--out", "refit_bad.json"])  # fmt: skip
    assert (cfg.run_dir / "ledger.jsonl").read_text() == before
    assert not (cfg.run_dir / "refit_bad.json").exists()

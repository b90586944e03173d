"""The student (BTT18 Alg 5): learns from released labels; semi-supervised mode; public data only."""

from __future__ import annotations

import torch

import pate_stab.run.student as run_student
from pate_stab.data import make_gaussian_mixture
from pate_stab.models import ModelSpec
from pate_stab.rng import seeded_generator
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.prepare import prepare
from pate_stab.student import StudentConfig, hard_targets, soft_targets, train_student


def _data(n: int, seed: int, classes: int = 3):
    return make_gaussian_mixture(n, num_classes=classes, dim=5, separation=5.0, generator=seeded_generator(seed))


def test_student_learns_from_released_labels_and_is_reproducible():
    x, y = _data(300, 1)
    labels = y.clone()
    labels[::5] = -1  # ⊥
    tx, ty = _data(500, 2)
    spec = ModelSpec("mlp", (5,), 3, hidden=(16,))
    cfg = StudentConfig(epochs=5, batch_size=32, lr=1e-2)
    accs = []
    for _ in range(2):
        t = hard_targets(labels, num_classes=3, bottom="drop")
        s = train_student(x, t, spec=spec, config=cfg, generator=seeded_generator(3), accelerator="cpu")
        accs.append(s.accuracy(tx, ty))
    assert accs[0] == accs[1]  # same generator → same student
    assert accs[0] > 0.9  # chance is 1/3; the mixture's means are 5 apart


def test_soft_student_and_pseudo_labelling_uses_the_unlabelled_pool():
    x, y = _data(200, 4, classes=2)
    pool, _ = _data(400, 5, classes=2)
    scores = y.double() * 0.9 + 0.05
    t = soft_targets(scores)
    cfg = StudentConfig(epochs=3, batch_size=32, lr=1e-2, pseudo_label_rounds=1, pseudo_label_threshold=0.8)
    s = train_student(
        x, t, spec=ModelSpec("logistic", (5,), 2), config=cfg, generator=seeded_generator(6),
        unlabelled_x=pool, accelerator="cpu",
    )  # fmt: skip
    assert [h["round"] for h in s.history] == [0, 1]
    assert s.history[1]["pseudo_labelled"] > 0
    tx, ty = _data(400, 7, classes=2)
    assert s.accuracy(tx, ty) > 0.9


def test_pipeline_student_sees_public_data_only(tmp_path, monkeypatch):
    """Sentinel: every tensor the student receives is made of public-pool rows, never of
    private or evaluation rows (the synthetic rows are continuous, hence all distinct)."""
    seen: dict[str, torch.Tensor] = {}
    real = run_student.train_student

    def spy(query_x, released, *, unlabelled_x=None, **kwargs):
        seen["query_x"], seen["unlabelled_x"] = query_x, unlabelled_x
        return real(query_x, released, unlabelled_x=unlabelled_x, **kwargs)

    monkeypatch.setattr(run_student, "train_student", spy)
    cfg = TransferConfig(
        run_name="sentinel", checkpoints_dir=str(tmp_path), num_teachers=300, num_private=6000, num_public=400,
        num_eval=300, separation=6.0, num_queries=100, epsilon=8.0, max_unstable=10, teacher_epochs=5, teacher_lr=0.05,
        student_epochs=2, pseudo_label_rounds=1, pseudo_label_threshold=0.5, accelerator="cpu",
    )  # fmt: skip
    report = run_transfer(cfg)
    assert report["status"] == "complete"
    prep = prepare(cfg)  # the same split, rebuilt from the seed (teachers reloaded)
    public = {tuple(r) for r in prep.task.public_x.tolist()}
    private = {tuple(r) for r in prep.task.private_x.tolist()}
    evaluation = {tuple(r) for r in prep.task.eval_x.tolist()}
    given = [tuple(r) for r in torch.cat([seen["query_x"], seen["unlabelled_x"]]).tolist()]
    assert len(set(given)) == prep.task.public_x.shape[0]  # the queries and the rest of the pool
    assert all(r in public for r in given)
    assert not any(r in private or r in evaluation for r in given)

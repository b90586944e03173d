"""Self-training of the vectorised teacher heads on every input (label privacy).

Under label privacy the inputs are public (docs/label_privacy.md), so a teacher may learn from all
of them unlabelled. Self-training (pseudo-labelling: Lee 2013, "Pseudo-Label"; with a confidence
threshold as in FixMatch, Sohn et al. 2020): after the heads are trained on their shards, each
teacher j predicts every input, keeps as pseudo-labels its **own** predictions whose top probability is
at least τ (fixed in advance), keeps its shard's true labels on its shard's rows, and is refitted from
a fresh initialisation on those; ``rounds`` times.

Privacy argument: teacher j's pseudo-labels are a function of teacher j's model and the inputs; its
refit reads its shard's labels, its pseudo-labels and the inputs. Nothing of another teacher enters:
the targets are one row per teacher (``targets[j]``), and the vectorised fit gives teacher j the
gradient of its own loss only (:class:`~pate_stab.teachers.training.TeacherEnsembleModule`). By
induction over the rounds, teacher j depends on the labels of shard j alone, so one changed label
moves one teacher, as without self-training (``tests/teachers/test_self_training.py``). Under record
privacy the private inputs of other shards are private: :func:`self_train_teachers` refuses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_generator, check_int, check_real, check_tensor
from pate_stab.models.fitting import quiet_lightning
from pate_stab.models.networks import ModelSpec
from pate_stab.rng import child_seed
from pate_stab.teachers.ensemble import TeacherEnsemble
from pate_stab.teachers.schedule import TrainConfig
from pate_stab.teachers.training import TeacherEnsembleModule, _trainer, train_teachers

__all__ = ["pseudo_targets", "self_train_teachers"]

TARGET_DTYPE = torch.int16
"""Per-teacher targets are stored as int16 (k × N of them): −1 marks a row a teacher does not train on."""


@torch.no_grad()
def pseudo_targets(
    teachers: TeacherEnsemble,
    x_all: Tensor,
    y: Tensor,
    shards: Sequence[Tensor],
    *,
    threshold: float,
    device: str | torch.device = "cpu",
) -> Tensor:
    """(k, N) int16 targets: row j holds teacher j's own predictions on ``x_all`` where their top
    probability is at least ``threshold``, −1 elsewhere, and ``y[shard_j]`` on shard j's rows (the
    private inputs are the first rows of ``x_all``). No other teacher's prediction or label enters row j."""
    threshold = check_real("threshold", threshold, low=0.0, high=1.0, low_inclusive=False)
    k = teachers.num_teachers
    if len(shards) != k:
        raise ValueError(f"{len(shards)} shards for {k} teachers")
    targets = torch.full((k, x_all.shape[0]), -1, dtype=TARGET_DTYPE)
    for t0, b0, logits in teachers._logit_chunks(x_all, 1024, 256, device):
        confidence, predicted = logits.float().softmax(-1).max(-1)  # (kc, b)
        keep = confidence >= threshold
        block = torch.where(keep, predicted, -1).to(device="cpu", dtype=TARGET_DTYPE)
        targets[t0 : t0 + block.shape[0], b0 : b0 + block.shape[1]] = block
    for j, shard in enumerate(shards):
        targets[j, shard] = y[shard].to(TARGET_DTYPE)
    return targets


def self_train_teachers(
    x: Tensor,
    y: Tensor,
    shards: Sequence[Tensor],
    *,
    public_x: Tensor,
    privacy_unit: str,
    spec: ModelSpec,
    threshold: float,
    rounds: int = 1,
    config: TrainConfig | None = None,
    generator: torch.Generator,
    accelerator: str = "auto",
) -> tuple[TeacherEnsemble, list[dict[str, Any]]]:
    """Train the heads on their shards, then ``rounds`` rounds of self-training on every input.

    Args:
        x, y, shards: the private inputs, labels and the k disjoint shards (as :func:`train_teachers`).
        public_x: the public pool's inputs; every private and public input is pseudo-labelled.
        privacy_unit: must be ``"label"`` (under record privacy other shards' inputs are private).
        spec: the heads ("logistic" or "mlp"); config: their training settings (both fits).
        threshold: τ, the least top probability of a kept pseudo-label, fixed in advance.
        rounds: pseudo-label-and-refit rounds (0: the plain heads).
        generator: the first fit's seeds, then each round's k seeds, are drawn from it in teacher order.

    Returns:
        The teachers after the last round, and per round the number of pseudo-labels each teacher kept
        (``{"round": r, "pseudo_labels": [...]}``: a statistic of the private labels; keep it private).
    """
    if privacy_unit != "label":
        raise ValueError(
            "self-training on every input needs privacy_unit 'label': under record privacy the private inputs of "
            f"other shards are private and no teacher may read them, got privacy_unit={privacy_unit!r}"
        )
    if spec.kind not in ("logistic", "mlp"):
        raise ValueError(f"self-training is for the vectorised heads ('logistic', 'mlp'), got {spec.kind!r}")
    rounds = check_int("rounds", rounds, minimum=0)
    threshold = check_real("threshold", threshold, low=0.0, high=1.0, low_inclusive=False)
    check_generator(generator)
    config = config or TrainConfig()
    public_x = check_tensor("public_x", public_x, floating=True, nonempty=False)
    shards = [torch.as_tensor(s).long() for s in shards]
    teachers = train_teachers(x, y, shards, spec=spec, config=config, generator=generator, accelerator=accelerator)
    x_all = torch.cat([x.reshape(x.shape[0], *public_x.shape[1:]), public_x]).float()
    history: list[dict[str, Any]] = []
    for r in range(1, rounds + 1):
        targets = pseudo_targets(teachers, x_all, y, shards, threshold=threshold)
        kept = targets >= 0
        rows = [kept[j].nonzero().flatten() for j in range(targets.shape[0])]
        history.append(
            {"round": r, "pseudo_labels": [int(kept[j].sum()) - int(s.numel()) for j, s in enumerate(shards)]}
        )
        seeds = [child_seed(generator) for _ in shards]
        module = TeacherEnsembleModule(spec, config, seeds, x_all, targets, rows)
        trainer = _trainer(config, accelerator=accelerator, devices=1, progress_bar=False, callbacks=[],
                           ckpt_dir=None, max_epochs=module.max_epochs)  # fmt: skip
        with quiet_lightning(True):
            trainer.fit(module)
        meta = {"train": asdict(config), "self_training": {"round": r, "threshold": threshold}, "seeds": seeds}
        teachers = module.to_ensemble(torch.arange(len(shards)), meta)
    return teachers, history

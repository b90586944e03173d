"""Later rounds' teachers on the student's representation (``round_features: student``): the
rebuilt teachers answer round 2 with the run's shards, each round is charged and replayed, the
round-2 selection reads no vote outside the releaser, and one record moves one rebuilt teacher."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import torch

import pate_stab.run.rounds as run_rounds
from pate_stab.models import ModelSpec
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.prepare import prepare
from pate_stab.run.rounds import round_spend_id, student_representation, student_round_teachers
from pate_stab.run.run_folder import PRIVATE_DIAGNOSTICS
from pate_stab.student.training import initialised_network
from pate_stab.teachers import PropagationTeachers
from tests.run.test_rounds import TWO, _counterfactual
from tests.run.test_transfer import ledger_of, small

STUDENT_ROUNDS = {**TWO, "teacher_model": "propagate", "round_features": "student", "student_hidden": (16,)}


class _Net:
    def __init__(self, spec: ModelSpec) -> None:
        self.network = initialised_network(spec, 3)


def test_round_features_settings_are_checked():
    ok = TransferConfig(rounds=2, teacher_model="propagate", round_features="student")
    assert TransferConfig.from_dict(ok.to_dict()) == ok and TransferConfig().round_features == "same"
    for kw, message in [
        ({"round_features": "teachers"}, "round_features must be one of same, student"),
        ({"round_features": "student", "teacher_model": "propagate"}, "got rounds=1"),
        ({"round_features": "student", "rounds": 2}, "use teacher_model: propagate"),
        ({"round_features": "student", "rounds": 2, "teacher_model": "propagate", "student_model": "logistic"},
         "student_model: mlp"),
        ({"round_features": "student", "rounds": 2, "teacher_model": "propagate", "student_hidden": ()},
         "student_hidden set"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            TransferConfig(**kw)


def test_student_representation_is_the_last_hidden_layer():
    student = _Net(ModelSpec("mlp", (5,), 3, hidden=(7, 4)))
    x = torch.randn(9, 5)
    body = student.network[1]
    expected = torch.relu(body[2](torch.relu(body[0](x))))
    rep = student_representation(student, x, batch_size=4)
    assert rep.shape == (9, 4) and torch.allclose(rep, expected, atol=1e-6)
    assert student_representation(student, x[:0]).shape == (0, 4)
    with pytest.raises(ValueError, match="dense student with a hidden layer"):
        student_representation(_Net(ModelSpec("logistic", (5,), 3)), x)


def test_one_record_moves_at_most_one_rebuilt_teacher():
    """The representation is a public map, so a rebuilt teacher still reads its own shard only:
    changing one private record's label changes the votes of that record's teacher alone."""
    gen = torch.Generator().manual_seed(0)
    public, private = torch.randn(60, 4, generator=gen), torch.randn(120, 4, generator=gen)
    labels = torch.randint(0, 3, (120,), generator=gen)
    shards = list(torch.randperm(120, generator=gen).chunk(12))
    student = _Net(ModelSpec("mlp", (4,), 3, hidden=(6,)))
    rep_pub, rep_priv = student_representation(student, public), student_representation(student, private)
    votes = PropagationTeachers(rep_pub, rep_priv, labels, shards, num_classes=3).predict_votes(rep_pub)
    owner = {int(i): j for j, s in enumerate(shards) for i in s}
    moved = 0
    for record in range(0, 120, 7):
        other = labels.clone()
        other[record] = (other[record] + 1) % 3
        again = PropagationTeachers(rep_pub, rep_priv, other, shards, num_classes=3).predict_votes(rep_pub)
        changed = torch.nonzero((again != votes).any(1)).flatten().tolist()
        assert changed in ([], [owner[record]])
        moved += bool(changed)
    assert moved > 0  # the check is not vacuous: some changes do move a teacher


@pytest.fixture(scope="module")
def student_rounds(tmp_path_factory):
    cfg = small(tmp_path_factory.mktemp("round_features"), **STUDENT_ROUNDS)
    built = []
    original = run_rounds.student_round_teachers

    def spy(prep, student):
        out = original(prep, student)
        built.append((prep, out[0]))
        return out

    run_rounds.student_round_teachers = spy
    try:
        report = run_transfer(cfg)
    finally:
        run_rounds.student_round_teachers = original
    return cfg, report, built


def test_round_two_is_answered_by_teachers_rebuilt_on_the_same_shards(student_rounds):
    cfg, report, built = student_rounds
    ((prep, rebuilt),) = built  # one rebuild, for round 2
    assert isinstance(rebuilt.teachers, PropagationTeachers) and rebuilt.teachers is not prep.teachers
    assert torch.equal(rebuilt.teachers.shard_of, prep.teachers.shard_of)
    assert rebuilt.votes.pool_x.shape == (prep.task.public_x.shape[0], 16)  # the student's hidden layer
    with ledger_of(cfg) as ledger:
        entries = ledger.entries()
    ids = [round_spend_id(cfg.run_name, "stability", cfg.epsilon, r, 2) for r in (1, 2)]
    assert [e.spend_id for e in entries] == ids
    for e in entries:
        assert 0.99 * cfg.epsilon / 2 <= e.epsilon <= cfg.epsilon / 2 * (1 + 1e-12)
    round2 = entries[1].result["selection"]["index"]
    # round 2's votes came from the rebuilt teachers, and only for the points offered to its releaser
    assert sorted(torch.nonzero(rebuilt.votes.requested).flatten().tolist()) == sorted(round2)
    assert not set(torch.nonzero(prep.votes.requested).flatten().tolist()) & set(round2)
    rounds = report["rounds"]
    assert [r["teachers"] for r in rounds] == ["the run's", "rebuilt on the student's hidden layer"]
    assert math.isclose(report["epsilon"], sum(e.epsilon for e in entries))
    diagnostics = json.loads((cfg.run_dir / PRIVATE_DIAGNOSTICS).read_text())
    (row,) = diagnostics["rounds_teachers"]
    assert row["round"] == 2 and row["teacher_features"] == "student hidden layer (16)"
    assert 0 <= row["teacher_mean"] <= 1 and 0 <= row["plurality"] <= 1
    assert "rounds_teachers" not in json.dumps(report)  # private figures stay out of the report


def test_rerun_replays_both_rounds_without_rebuilding(student_rounds, monkeypatch):
    cfg, report, _ = student_rounds
    with ledger_of(cfg) as ledger:
        entries, spent = ledger.entries(), ledger.spent()

    def refuse(*args, **kwargs):
        raise AssertionError("a replayed round rebuilt its teachers")

    monkeypatch.setattr(run_rounds, "student_round_teachers", refuse)
    monkeypatch.setattr(run_rounds, "_steer", refuse)
    again = run_transfer(replace(cfg, student_epochs=2))
    assert [r["replayed"] for r in again["rounds"]] == [True, True]
    assert [{k: v for k, v in r.items() if k != "replayed"} for r in again["rounds"]] == [
        {k: v for k, v in r.items() if k != "replayed"} for r in report["rounds"]
    ]
    with ledger_of(cfg) as ledger:
        assert ledger.entries() == entries and ledger.spent() == spent


def test_round_two_selection_reads_no_vote_outside_the_releaser(student_rounds, tmp_path):
    cfg, _, _ = student_rounds
    first, second, votes = _counterfactual(replace(cfg, run_name="counterfactual"), tmp_path)
    assert first.rounds[1].index.numel() > 0
    assert torch.equal(first.rounds[0].labels, second.rounds[0].labels)
    assert torch.equal(first.rounds[1].index, second.rounds[1].index)
    # the run's votes were read for round 1's points only; round 2 asked its own teachers
    assert votes.asked == first.rounds[0].index.tolist()
    assert first.round_teachers[0] is None and first.round_teachers[1] is not None


@pytest.mark.filterwarnings("ignore:teacher schedule too short")
def test_student_round_teachers_refuses_trained_teachers(tmp_path):
    prep = prepare(small(tmp_path, num_queries=60))
    with pytest.raises(ValueError, match="rebuilds propagation teachers"):
        student_round_teachers(prep, _Net(ModelSpec("mlp", (2,), 2, hidden=(3,))))

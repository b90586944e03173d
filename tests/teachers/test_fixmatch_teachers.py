"""FixMatch teachers (PATE-FM, pate_stab.teachers.fixmatch): one changed label moves at most one teacher,
a teacher never receives another shard's labels, and under record privacy never another shard's inputs.

Tiny settings (CPU, 8 × 8 images, 3 teachers, a few steps, seeded): the teachers are compared bit for bit."""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.models.fixmatch import FixMatchConfig
from pate_stab.models.networks import ModelSpec
from pate_stab.teachers.fixmatch import (
    UNLABELLED,
    FixMatchTeacherModule,
    stack_inputs,
    teachers_per_stack,
    train_fixmatch_teachers,
)

N_PRIVATE, N_PUBLIC, K, C = 30, 10, 3, 3
SPEC = ModelSpec("cnn", (1, 8, 8), C, hidden=(16,), channels=(4, 8))
# τ = 0.2 < 1/C: every pseudo-label passes, so the unlabelled inputs reach every teacher's gradient
CONFIG = FixMatchConfig(steps=4, batch_size=4, mu=2, threshold=0.2, channels=(4, 8), hidden=(16,), log_every=4)


def _data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(N_PRIVATE, 1, 8, 8, generator=g)
    y = torch.randint(0, C, (N_PRIVATE,), generator=g)
    public = torch.rand(N_PUBLIC, 1, 8, 8, generator=g)
    shards = [torch.arange(j, N_PRIVATE, K) for j in range(K)]  # shard j: records j, j + 3, …
    return x, y, public, shards


def _train(x: torch.Tensor, y: torch.Tensor, unit: str, *, stack_size: int | None = None):
    _, _, public, shards = _data()
    return train_fixmatch_teachers(
        x, y, shards, public_x=public, privacy_unit=unit, spec=SPEC, config=CONFIG,
        generator=torch.Generator().manual_seed(1), accelerator="cpu", stack_size=stack_size,
    )  # fmt: skip


@functools.cache
def _baseline(unit: str):
    x, y, _, _ = _data()
    return _train(x, y, unit)


def _moved(a, b) -> torch.Tensor:
    """(k,) teachers whose weights differ anywhere (bit for bit)."""
    return torch.stack([(a.params[n] != b.params[n]).flatten(1).any(1) for n in a.params]).any(0)


@settings(max_examples=4, deadline=None)
@given(record=st.integers(0, N_PRIVATE - 1), shift=st.integers(1, C - 1))
def test_one_changed_label_moves_at_most_one_teacher(record, shift):
    x, y, public, _ = _data()
    y2 = y.clone()
    y2[record] = (y2[record] + shift) % C
    d, n = _baseline("label"), _train(x, y2, "label")
    moved = _moved(d, n)
    assert moved.tolist() == [j == record % K for j in range(K)]  # its own shard's teacher, no other
    queries = torch.cat([x, public])
    votes_moved = (d.predict_votes(queries) != n.predict_votes(queries)).any(1)
    assert not bool(votes_moved[torch.arange(K) != record % K].any())


def test_under_record_privacy_a_changed_record_moves_only_its_teacher():
    """Record privacy: another shard's private inputs are private, so no teacher reads them; one changed
    record (input and label) moves its own teacher only."""
    x, y, _, _ = _data()
    x2, y2 = x.clone(), y.clone()
    x2[4], y2[4] = torch.rand(1, 8, 8, generator=torch.Generator().manual_seed(9)), (y[4] + 1) % C
    moved = _moved(_baseline("record"), _train(x2, y2, "record"))
    assert moved.tolist() == [False, True, False]


def test_under_label_privacy_a_changed_input_may_move_many_teachers():
    """Label privacy: every input is every teacher's unlabelled data, so a changed *input* moves many
    teachers. Allowed: such a pair is not a label neighbour; the guarantee covers changed labels."""
    x, y, _, _ = _data()
    x2 = x.clone()
    x2[4] = torch.rand(1, 8, 8, generator=torch.Generator().manual_seed(9))
    moved = _moved(_baseline("label"), _train(x2, y, "label"))
    assert int(moved.sum()) > 1


def test_a_teacher_is_given_its_own_shards_labels_and_the_unit_s_unlabelled_inputs():
    x, y, public, shards = _data()
    for unit in UNLABELLED:
        inputs = stack_inputs(x, y, shards, public, privacy_unit=unit)
        for s, shard in enumerate(shards):
            assert torch.equal(inputs.labels[s], y[shard])  # no other label is handed over
            assert torch.equal(inputs.images[inputs.labelled_rows[s]], x[shard])
            unlabelled = inputs.images[inputs.unlabelled_rows[s]]
            expected = torch.cat([x, public]) if unit == "label" else torch.cat([x[shard], public])
            assert torch.equal(unlabelled, expected)
    # a stack of one teacher under record privacy holds no other shard's private input at all
    alone = stack_inputs(x, y, shards[:1], public, privacy_unit="record")
    assert torch.equal(alone.images, torch.cat([x[shards[0]], public]))
    module = FixMatchTeacherModule(SPEC, CONFIG, [(1, 2, 3)], alone)
    assert [t.tolist() for t in module._labels] == [y[shards[0]].tolist()]
    assert not any("label" in name or "image" in name for name in module.state_dict())


def test_shared_or_repeated_records_are_refused():
    x, y, public, shards = _data()
    with pytest.raises(ValueError, match="another shard's label"):
        stack_inputs(x, y, [shards[0], torch.cat([shards[1], shards[0][:1]])], public, privacy_unit="label")
    with pytest.raises(ValueError, match="another shard's label"):
        train_fixmatch_teachers(
            x, y, [shards[0], shards[0]], public_x=public, privacy_unit="label", spec=SPEC, config=CONFIG,
            generator=torch.Generator().manual_seed(1), accelerator="cpu",
        )  # fmt: skip
    with pytest.raises(ValueError, match="privacy_unit"):
        stack_inputs(x, y, shards, public, privacy_unit="features")
    with pytest.raises(ValueError, match="CNNs"):
        train_fixmatch_teachers(
            x, y, shards, public_x=public, privacy_unit="label", spec=ModelSpec("mlp", (1, 8, 8), C),
            config=CONFIG, generator=torch.Generator().manual_seed(1), accelerator="cpu",
        )  # fmt: skip


def test_stacks_train_the_teachers_one_at_a_time_would():
    """A stack of three and three stacks of one (the sequential mode): the same teachers up to rounding."""
    x, y, public, _ = _data()
    stacked, alone = _baseline("label"), _train(x, y, "label", stack_size=1)
    assert stacked.config["mode"] == "stacks of 3" and alone.config["mode"] == "stacks of 1"
    for name in stacked.params:
        torch.testing.assert_close(stacked.params[name], alone.params[name], rtol=1e-5, atol=1e-6)
    assert teachers_per_stack(SPEC, CONFIG, 100, "cpu") == 8 and teachers_per_stack(SPEC, CONFIG, 3, "cpu") == 3


def test_a_teacher_with_an_empty_shard_is_left_untrained_and_moves_no_other():
    """A shard may be empty (keyed hashing); its teacher gets no loss, the others train as before."""
    x, y, public, shards = _data()
    empty = [shards[0], shards[1][:0], shards[2]]
    common = {"public_x": public, "privacy_unit": "label", "spec": SPEC, "config": CONFIG, "accelerator": "cpu"}
    with_empty = train_fixmatch_teachers(x, y, empty, generator=torch.Generator().manual_seed(1), **common)
    full = _baseline("label")
    for name in full.params:
        assert torch.equal(with_empty.params[name][0], full.params[name][0])
        assert torch.equal(with_empty.params[name][2], full.params[name][2])
    assert with_empty.num_teachers == 3


def test_the_cost_recipe_runs_its_smoke_size():
    """recipes/bench/fixmatch_teacher_cost.py --smoke: one stack of 3 tiny teachers, one JSON line."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "recipes" / "bench" / "fixmatch_teacher_cost.py"
    proc = subprocess.run([sys.executable, str(script), "--smoke"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["teachers_per_stack"] == 3 and record["device"] == "cpu" and record["timed_steps"] == 3
    assert record["recipe_steps_per_teacher"] == 69_000 // 64

"""Teachers over 2 CPU processes (gloo, Lightning's popen launcher) equal the one-process ensemble."""

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from pate_stab.rng import seeded_generator
from pate_stab.teachers import TeacherEnsemble, train_teachers
from pate_stab.teachers.distributed import latest_common_epoch, rank_slice, train_teachers_ddp
from tests.teachers.ddp_worker import CONFIGS, SPECS, problem

ROOT = Path(__file__).resolve().parents[2]


def _single_process(kind):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the workers
    try:
        x, y, shards = problem(kind)
        ref = train_teachers(x, y, shards, spec=SPECS[kind], config=CONFIGS[kind], generator=seeded_generator(7),
                             accelerator="cpu")  # the workers' device: the comparison is bit for bit  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return x, ref


def _launch(*args):
    """Run the worker script (2 ranks; it exits by itself after 240 s at most)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "tests.teachers.ddp_worker", *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]


def _check_ddp_equals_single_process(kind, tmp_path):
    out = tmp_path / "teachers"
    _launch(out, kind)
    x, ref = _single_process(kind)
    ddp = TeacherEnsemble.load(out)
    assert ddp.teacher_indices.tolist() == list(range(5))
    assert ddp.config["world_size"] == 2 and ddp.config["seeds"] == ref.config["seeds"]
    for name, p in ref.params.items():
        assert torch.equal(ddp.params[name], p), name  # bit-identical
    # the same epochs (early stopping waits for the last teacher on any rank) and metrics
    trained = ref.metrics["trained"]
    assert trained[-1, :3].sum() == 0 and trained[-1, 3:].any()  # rank 0's teachers had all stopped
    for key, value in ref.metrics.items():
        assert torch.equal(ddp.metrics[key], value), key
    xq = x[:40] + 0.5 * torch.randn(x[:40].shape, generator=seeded_generator(3))
    assert torch.equal(ddp.predict_votes(xq), ref.predict_votes(xq))
    _assert_owner_only(out)


def _assert_owner_only(root):
    """Models of the private data: every folder under ``root`` 0700, every file 0600 (DESIGN fact 14)."""
    wrong = {
        str(p): oct(p.stat().st_mode & 0o777)
        for p in [root, *root.rglob("*")]
        if p.stat().st_mode & 0o777 != (0o700 if p.is_dir() else 0o600)
    }
    assert not wrong, wrong


@pytest.mark.accelerator
def test_ddp_two_cpu_ranks_equal_single_process_mlp(tmp_path):
    _check_ddp_equals_single_process("mlp", tmp_path)


@pytest.mark.slow
def test_ddp_two_cpu_ranks_equal_single_process_cnn(tmp_path):
    _check_ddp_equals_single_process("cnn", tmp_path)


def test_rank_slices_cover_teachers_once():
    parts = [rank_slice(10, rank=r, world_size=4) for r in range(4)]
    assert torch.cat(parts).tolist() == list(range(10))
    assert [len(p) for p in parts] == [3, 3, 2, 2]


def test_latest_common_epoch(tmp_path):
    assert latest_common_epoch(tmp_path, 2) is None
    for rank, epochs in ((0, (3, 4)), (1, (2, 3))):  # rank 0 wrote epoch 4, rank 1 crashed first
        d = tmp_path / f"slice-{rank:05d}-of-00002"
        d.mkdir()
        for e in epochs:
            (d / f"epoch={e:06d}.ckpt").touch()
    assert latest_common_epoch(tmp_path, 2) == 3


def test_ddp_rejects_more_ranks_than_teachers():
    x, y, shards = problem("mlp")
    with pytest.raises(ValueError, match="every rank needs a teacher"):
        train_teachers_ddp(x, y, shards, spec=SPECS["mlp"], generator=seeded_generator(7), devices=6)
    with pytest.raises(ValueError, match="accelerator"):
        train_teachers_ddp(x, y, shards, spec=SPECS["mlp"], generator=seeded_generator(7), accelerator="tpu")


@pytest.mark.slow
def test_ddp_resume_from_slice_checkpoints_equals_straight_run(tmp_path):
    run = tmp_path / "checkpoints" / "run" / "teachers"
    _launch(run, "mlp", 2)  # 2 epochs, then "interrupted"
    slices = sorted(p.name for p in (run / "lightning").iterdir())
    assert slices == ["slice-00000-of-00002", "slice-00001-of-00002"]
    assert latest_common_epoch(run / "lightning", 2) == 1
    _launch(run, "mlp", 4, "resume")  # epochs 2 and 3 from the slice checkpoints
    assert latest_common_epoch(run / "lightning", 2) == 3
    assert len(list((run / "lightning" / "slice-00000-of-00002").glob("*.ckpt"))) == 2  # the last two kept
    x, y, shards = problem("mlp")
    config = replace(CONFIGS["mlp"], epochs=4, patience=None)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        straight = train_teachers(
            x, y, shards, spec=SPECS["mlp"], config=config, generator=seeded_generator(7), accelerator="cpu"
        )
    finally:
        torch.set_num_threads(threads)
    resumed = TeacherEnsemble.load(run)
    for name, p in straight.params.items():
        assert torch.equal(resumed.params[name], p), name
    assert torch.equal(resumed.metrics["train_loss"], straight.metrics["train_loss"])
    _assert_owner_only(run)  # the slices' Lightning checkpoints included
    # assemble=False: nothing gathered; each rank writes its slice, and the slices join to the same
    slices_run = tmp_path / "slices-run"
    _launch(slices_run, "mlp", 4, "fresh", "slices")
    assert not (slices_run / "weights.pt").exists()
    parts = [TeacherEnsemble.load(d) for d in sorted((slices_run / "slices").iterdir())]
    assert [p.teacher_indices.tolist() for p in parts] == [[0, 1, 2], [3, 4]]
    _assert_owner_only(slices_run)
    joined = TeacherEnsemble.concatenate(parts)
    for name, p in straight.params.items():
        assert torch.equal(joined.params[name], p), name

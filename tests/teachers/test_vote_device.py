"""The vectorised teachers' votes on the run's device: the pool moves there once, the stacked
weights once per run (not once per request or per teacher chunk), the inputs never per batch; the
votes are bit-identical to the CPU's."""

from __future__ import annotations

import torch

from pate_stab.models import init_stacked_parameters
from pate_stab.models.networks import ModelSpec
from pate_stab.teachers import PoolVotes, TeacherEnsemble
from tests.device_moves import fake_cuda_moves

K, D = 6, 5


def _ensemble(num_classes: int) -> TeacherEnsemble:
    spec = ModelSpec("mlp", (D,), num_classes, hidden=(7,))
    return TeacherEnsemble(spec, init_stacked_parameters(spec, list(range(K))))


POOL = torch.randn(50, D, generator=torch.Generator().manual_seed(0))
REQUESTS = [torch.tensor([3, 1, 3, 40]), torch.tensor([2]), torch.arange(30)]


def _votes(num_classes: int, device: str) -> tuple[list[torch.Tensor], list[torch.Tensor] | None, TeacherEnsemble]:
    teachers = _ensemble(num_classes)
    votes = PoolVotes(teachers, POOL, num_classes, device=device)
    hist = [votes.histograms(i) for i in REQUESTS]
    scores = [votes.scores(i) for i in REQUESTS] if num_classes == 2 else None
    return hist, scores, teachers


def test_ensemble_votes_keep_the_weights_and_the_pool_on_the_device(monkeypatch):
    cpu_hist, cpu_scores, _ = _votes(2, "cpu")
    moves = fake_cuda_moves(monkeypatch)
    gpu_hist, gpu_scores, teachers = _votes(2, "cuda")
    # the pool once; no request moves its rows (3, 1 and 30 of them)
    rows = [s for s in moves.shapes if len(s) == 2 and s[1] == D]
    assert rows.count((50, D)) == 1 and not {(3, D), (1, D), (30, D)} & set(rows)
    for name, p in teachers.params.items():
        assert moves.count(tuple(p.shape)) == 1, name  # each stacked tensor once, for all requests
    for cpu, gpu in zip(cpu_hist, gpu_hist, strict=True):
        assert torch.equal(cpu, gpu)
    assert gpu_scores is not None and cpu_scores is not None
    for cpu, gpu in zip(cpu_scores, gpu_scores, strict=True):
        torch.testing.assert_close(gpu, cpu, rtol=0, atol=0)


def test_predict_votes_moves_its_input_once_not_per_batch(monkeypatch):
    teachers = _ensemble(3)
    cpu_votes = teachers.predict_votes(POOL, batch_size=9, teacher_chunk=4)
    moves = fake_cuda_moves(monkeypatch)
    gpu_votes = teachers.predict_votes(POOL, batch_size=9, teacher_chunk=4, device="cuda")
    again = teachers.predict_votes(POOL, batch_size=9, teacher_chunk=4, device="cuda")
    rows = [s for s in moves.shapes if len(s) == 2 and s[1] == D]
    assert rows.count((50, D)) == 2 and (9, D) not in rows  # once per call, not per batch of 9
    assert all(moves.count(tuple(p.shape)) == 1 for p in teachers.params.values())  # weights kept there
    assert torch.equal(gpu_votes, cpu_votes) and torch.equal(again, cpu_votes)
    assert gpu_votes.device.type == "cpu"

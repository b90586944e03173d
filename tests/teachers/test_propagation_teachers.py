"""PropagationTeachers: votes as kernel_votes gives them, one record moves one teacher (change, add,
remove), the graph sees only public features, and PoolVotes computes only the points asked for."""

from __future__ import annotations

import pytest
import torch

from pate_stab.features.propagation import PoolGraph, kernel_votes
from pate_stab.teachers import PoolVotes, PropagationSpec, PropagationTeachers

CENTRES = torch.tensor([[3.0, 0, 0, 0], [0, 3.0, 0, 0], [0, 0, 3.0, 0]])
SPEC = PropagationSpec(num_neighbors=5, power=1.0, alpha=0.9, steps=10, pca_dim=None)
K = 4


def _clusters(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    return CENTRES[y] + 0.8 * torch.randn(n, 4, generator=g), y


PUBLIC, _ = _clusters(200, 1)
PRIVATE, LABELS = _clusters(80, 2)
QUERIES, QUERY_Y = _clusters(60, 3)


def _shards(shard_of: torch.Tensor) -> list[torch.Tensor]:
    return [torch.nonzero(shard_of == j).flatten() for j in range(K)]


def _teachers(x: torch.Tensor, y: torch.Tensor, shard_of: torch.Tensor, **kw) -> PropagationTeachers:
    return PropagationTeachers(PUBLIC, x, y, _shards(shard_of), num_classes=3, spec=SPEC, **kw)


SHARD_OF = torch.arange(80) % K


def test_votes_match_kernel_votes_and_are_accurate():
    teachers = _teachers(PRIVATE, LABELS, SHARD_OF, chunk=7)  # several query batches
    votes = teachers.predict_votes(QUERIES)
    graph = PoolGraph(num_neighbors=5, power=1.0, alpha=0.9, steps=10).fit(PUBLIC)
    expected = kernel_votes(graph.kernel(PRIVATE, QUERIES), LABELS, SHARD_OF, num_teachers=K, num_classes=3)
    assert votes.shape == (K, 60) and votes.dtype == torch.int64
    assert torch.equal(votes, expected)
    assert (votes == QUERY_Y).double().mean() > 0.9
    scores = teachers.predict_scores(QUERIES)
    assert scores.shape == (K, 60, 3)
    torch.testing.assert_close(scores.sum(-1), torch.ones(K, 60))
    assert torch.equal(scores.argmax(-1), votes)


def test_changing_one_record_changes_only_its_own_teacher():
    before = _teachers(PRIVATE, LABELS, SHARD_OF).predict_votes(QUERIES)
    x, y = PRIVATE.clone(), LABELS.clone()
    for r in (2, 6, 10):  # records of teacher 2: other classes' points with other labels
        x[r] = CENTRES[(y[r] + 1) % 3]
        y[r] = (y[r] + 1) % 3
    after = _teachers(x, y, SHARD_OF).predict_votes(QUERIES)
    others = torch.tensor([0, 1, 3])
    assert torch.equal(before[others], after[others])
    assert not torch.equal(before[2], after[2])


@pytest.mark.parametrize("change", ["remove", "add"])
def test_adding_or_removing_one_record_changes_only_its_own_teacher(change):
    before = _teachers(PRIVATE, LABELS, SHARD_OF).predict_votes(QUERIES)
    if change == "remove":  # record 5 (teacher 1) leaves; every later record shifts by one row
        keep = torch.arange(80) != 5
        x, y, shard_of = PRIVATE[keep], LABELS[keep], SHARD_OF[keep]
    else:  # a new record for teacher 3, placed first so every row shifts
        x = torch.cat([CENTRES[:1] * 0.5 + CENTRES[1:2] * 0.5, PRIVATE])
        y, shard_of = torch.cat([torch.tensor([1]), LABELS]), torch.cat([torch.tensor([3]), SHARD_OF])
    after = _teachers(x, y, shard_of).predict_votes(QUERIES)
    changed = 1 if change == "remove" else 3
    others = torch.tensor([j for j in range(K) if j != changed])
    assert torch.equal(before[others], after[others])


def test_graph_sees_only_the_public_features():
    teachers = _teachers(PRIVATE, LABELS, SHARD_OF)
    graph = PoolGraph(num_neighbors=5, power=1.0, alpha=0.9, steps=10).fit(PUBLIC)
    assert torch.equal(teachers.graph.pool, graph.pool)
    assert torch.equal(teachers.graph.adjacency.to_dense(), graph.adjacency.to_dense())


def test_pool_votes_compute_only_the_points_asked_for():
    teachers = _teachers(PRIVATE, LABELS, SHARD_OF)
    votes = PoolVotes(teachers, QUERIES, 3)
    index = torch.tensor([5, 1, 5, 40])
    hist = votes.histograms(index)
    assert hist.shape == (4, 3) and (hist.sum(1) == K).all()
    assert votes.requested.nonzero().flatten().tolist() == [1, 5, 40]
    direct = teachers.predict_votes(QUERIES[index])
    assert torch.equal(hist, torch.nn.functional.one_hot(direct, 3).sum(0))


def test_errors():
    with pytest.raises(ValueError, match="shard"):
        PropagationTeachers(PUBLIC, PRIVATE, LABELS, [torch.arange(10)], num_classes=3, spec=SPEC)
    with pytest.raises(ValueError, match="length"):
        PropagationTeachers(PUBLIC, PRIVATE, LABELS[:5], _shards(SHARD_OF), num_classes=3, spec=SPEC)
    teachers = _teachers(PRIVATE, LABELS, SHARD_OF)
    with pytest.raises(ValueError, match="two classes"):
        teachers.predict_scores(QUERIES, binary=True)


def test_graph_and_votes_move_whole_tensors_to_the_device_once(monkeypatch):
    """On a GPU the public and private features move there once, the graph (and its PCA) is built
    there, and the pool moves there once for every later vote request: no request moves its
    queries (the stand-in GPU of tests/device_moves.py keeps the tensors on the CPU). The votes and
    scores are bit-identical to the CPU's."""
    from tests.device_moves import fake_cuda_moves

    spec = PropagationSpec(num_neighbors=5, power=1.0, alpha=0.9, steps=10, pca_dim=3)
    requests = [torch.tensor([5, 1, 5, 40]), torch.tensor([2, 3]), torch.arange(60)]

    def run(device: str) -> tuple[list[torch.Tensor], torch.Tensor, PropagationTeachers]:
        teachers = PropagationTeachers(PUBLIC, PRIVATE, LABELS, _shards(SHARD_OF), num_classes=3, spec=spec,
                                       device=device)  # fmt: skip
        votes = PoolVotes(teachers, QUERIES, 3, device=device)
        return [votes.histograms(i) for i in requests], teachers.predict_scores(QUERIES), teachers

    cpu_hist, cpu_scores, _ = run("cpu")
    moves = fake_cuda_moves(monkeypatch)
    gpu_hist, gpu_scores, teachers = run("cuda")
    # public features (the graph), private features (their affinities), the pool (the votes): once each
    assert sorted(moves.with_trailing((4,))) == [(60, 4), (80, 4), (200, 4)]
    assert moves.count((80,)) == 2  # the labels and the shard map, once each
    for cpu, gpu in zip(cpu_hist, gpu_hist, strict=True):
        assert torch.equal(cpu, gpu) and gpu.device.type == "cpu"
    torch.testing.assert_close(gpu_scores, cpu_scores, rtol=0, atol=0)
    assert all(t.device.type == "cpu" for t in teachers.graph.state_dict()["pca"].values() if torch.is_tensor(t))

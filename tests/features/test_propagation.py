"""Label propagation over a public kNN graph: correctness on clusters, one record moves one teacher."""

import pytest
import torch

from pate_stab.features.propagation import PoolGraph, kernel_votes, knn_affinities


def _clusters(n: int, seed: int, centres: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, centres.shape[0], (n,), generator=g)
    return centres[y] + 0.3 * torch.randn(n, centres.shape[1], generator=g), y


CENTRES = torch.tensor([[3.0, 0, 0, 0], [0, 3.0, 0, 0], [0, 0, 3.0, 0]])


def test_affinities_are_sparse_cosine_powers():
    base = torch.nn.functional.normalize(torch.randn(20, 3, generator=torch.Generator().manual_seed(0)), dim=1)
    a = knn_affinities(base[:4], base, num_neighbors=3, power=2.0).to_dense()
    assert a.shape == (4, 20) and ((a > 0).sum(1) <= 3).all()
    torch.testing.assert_close(a[torch.arange(4), torch.arange(4)], torch.ones(4))  # each point is its own neighbour
    b = knn_affinities(base[:4], base, num_neighbors=3, power=2.0, exclude_self=True).to_dense()
    assert (b[torch.arange(4), torch.arange(4)] == 0).all()


def test_teachers_recover_cluster_labels_from_few_records():
    public, _ = _clusters(300, 1, CENTRES)
    private, y = _clusters(60, 2, CENTRES)
    queries, yq = _clusters(50, 3, CENTRES)
    graph = PoolGraph(num_neighbors=5, alpha=0.9, steps=10).fit(public)
    kernel = graph.kernel(private, queries)
    assert kernel.shape == (60, 50) and (kernel >= 0).all()
    shard_of = torch.arange(60) % 6  # 6 teachers with 10 records each
    votes = kernel_votes(kernel, y, shard_of, num_teachers=6, num_classes=3)
    assert votes.shape == (6, 50)
    assert (votes == yq).double().mean() > 0.95


def test_one_record_changes_only_its_own_teacher():
    public, _ = _clusters(200, 4, CENTRES)
    private, y = _clusters(40, 5, CENTRES)
    queries, _ = _clusters(30, 6, CENTRES)
    graph = PoolGraph(num_neighbors=5).fit(public)
    shard_of = torch.arange(40) % 4
    before = kernel_votes(graph.kernel(private, queries), y, shard_of, num_teachers=4, num_classes=3)
    changed_x, changed_y = private.clone(), y.clone()
    changed_x[2] = CENTRES[(y[2] + 1) % 3]  # record 2 (teacher 2) replaced by another class's point
    changed_y[2] = (y[2] + 1) % 3
    after = kernel_votes(graph.kernel(changed_x, queries), changed_y, shard_of, num_teachers=4, num_classes=3)
    others = torch.tensor([0, 1, 3])
    assert torch.equal(before[others], after[others])


def test_graph_uses_only_the_public_features_passed():
    public, _ = _clusters(100, 7, CENTRES)
    a = PoolGraph(num_neighbors=4).fit(public)
    b = PoolGraph(num_neighbors=4).fit(public.clone())
    private, queries = public[:10] + 0.1, public[10:20] - 0.1
    torch.testing.assert_close(a.kernel(private, queries), b.kernel(private, queries))
    torch.testing.assert_close(a.mean, public.mean(0))
    c = PoolGraph(num_neighbors=4, pca_dim=2).fit(public)
    assert c.pca is not None and c.pool.shape == (100, 2)
    assert c.kernel(private, queries).shape == (10, 10)


def test_errors():
    with pytest.raises(RuntimeError, match="before fit"):
        PoolGraph().kernel(torch.rand(3, 2), torch.rand(3, 2))
    with pytest.raises(ValueError, match="alpha"):
        PoolGraph(alpha=1.0)
    with pytest.raises(ValueError, match="more than num_neighbors"):
        PoolGraph(num_neighbors=10).fit(torch.rand(5, 2))
    graph = PoolGraph(num_neighbors=2).fit(torch.rand(10, 3))
    with pytest.raises(ValueError, match="columns"):
        graph.kernel(torch.rand(4, 2), torch.rand(4, 3))
    with pytest.raises(ValueError, match="NaN"):
        graph.kernel(torch.full((4, 3), float("nan")), torch.rand(4, 3))
    kernel, zeros = torch.rand(4, 2), torch.zeros(4, dtype=torch.long)
    with pytest.raises(ValueError, match="labels"):
        kernel_votes(kernel, torch.tensor([0, 1, 2, 5]), zeros, num_teachers=1, num_classes=3)
    with pytest.raises(ValueError, match="shard_of"):
        kernel_votes(kernel, zeros, torch.tensor([0, 0, 1, 3]), num_teachers=2, num_classes=3)
    with pytest.raises(ValueError, match="rows"):
        kernel_votes(kernel, zeros[:3], zeros, num_teachers=1, num_classes=3)


def test_graph_building_emits_no_sparse_notice():
    """torch 2.11 warns "Sparse invariant checks are implicitly disabled" even with
    ``check_invariants=False``; the graph and affinities are built without a warning."""
    import warnings

    from pate_stab.features.propagation import PoolGraph, knn_affinities

    x = torch.nn.functional.normalize(torch.randn(30, 5, generator=torch.Generator().manual_seed(0)), dim=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        knn_affinities(x, x, num_neighbors=4, power=1.0)
        PoolGraph(num_neighbors=4).fit(x)

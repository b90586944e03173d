"""Teachers that use the unlabelled public pool: label propagation over a public kNN graph.

Zhou, Bousquet, Lal, Weston & Schölkopf (2004), "Learning with local and global consistency":
with S = D^{-1/2} W D^{-1/2} the normalised affinity of a k-nearest-neighbour graph, label
scores spread as F = Σ_t (αS)^t Y (the fixed point of F ← αSF + Y). Affinities are
``max(cos, 0)^power`` between features (Iscen, Tolias, Avrithis & Chum 2019, "Label
propagation for deep semi-supervised learning", use the same form on CNN features).

Here the graph is built on the *public* pool's features only. A private record l enters through
its affinities ``a_l`` to its nearest pool points, a query q through ``a_q``, and the
propagated kernel ``K(l, q) = a_l · M · a_q`` with ``M = Σ_{t ≤ T} (αS)^t`` depends on public
data, x_l and q only. Teacher j scores class c on q by the mean kernel to its own records of
that class, ``Σ_{l ∈ shard j, y_l = c} K(l, q) / n_{j,c}``, and votes for the argmax. Teacher
j's votes therefore depend on its own shard (and public data) only: adding, removing or
changing a record moves one teacher, exactly as for trained heads (DESIGN.md fact 2). A class
absent from a teacher's shard scores 0; a query with no affinity to any of the teacher's
records gets class 0.

Everything here computes on the device of its input: a graph fitted on features held on a GPU keeps
its pool, normalisation and sparse adjacency there, and the kernel and class scores of queries sent
there stay there (:meth:`PoolGraph.to` makes a copy elsewhere).
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from pate_stab._checks import check_int, check_positive, check_real, check_tensor
from pate_stab.features.pca import PublicFeatures

__all__ = ["PoolGraph", "kernel_class_scores", "kernel_votes", "knn_affinities", "sparse_coo", "to_sparse_csr"]


def sparse_coo(index: Tensor, values: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A coalesced sparse COO tensor from entries built valid here (in range, no check needed).

    torch 2.11 emits "Sparse invariant checks are implicitly disabled" even when
    ``check_invariants=False`` is passed explicitly (later releases do not); the notice is library
    noise in a user's terminal, so it is filtered here and nowhere else.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Sparse invariant checks are implicitly disabled", category=UserWarning
        )
        return torch.sparse_coo_tensor(index, values, shape, check_invariants=False).coalesce()


def to_sparse_csr(matrix: Tensor) -> Tensor:
    """``matrix.to_sparse_csr()`` without torch's "sparse CSR support is in beta" notice (the CSR
    products used here are the stable ones; the notice is library noise in a user's terminal)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)
        return matrix.to_sparse_csr()


def knn_affinities(
    queries: Tensor, base: Tensor, *, num_neighbors: int, power: float, exclude_self: bool = False, chunk: int = 2048
) -> Tensor:
    """Sparse (n_q, n_b) affinities of each query to its ``num_neighbors`` most cosine-similar
    rows of ``base``: ``max(cos, 0)^power``. Rows must be L2-normalised. Each row depends only on
    its own query (and ``base``)."""
    rows, cols, vals = [], [], []
    for start in range(0, queries.shape[0], chunk):
        sim = queries[start : start + chunk] @ base.T  # (c, n_b)
        if exclude_self:
            idx = torch.arange(start, start + sim.shape[0], device=sim.device)
            sim[torch.arange(sim.shape[0], device=sim.device), idx] = -2.0
        v, i = sim.topk(num_neighbors, dim=1)
        rows.append(torch.arange(start, start + sim.shape[0], device=sim.device).repeat_interleave(num_neighbors))
        cols.append(i.reshape(-1))
        vals.append(v.clamp(min=0).pow(power).reshape(-1))
    index = torch.stack([torch.cat(rows), torch.cat(cols)])
    shape = (queries.shape[0], base.shape[0])
    return sparse_coo(index, torch.cat(vals), shape)


class PoolGraph:
    """kNN graph of the public pool's features and the propagated kernel built on it.

    Features are optionally reduced by a PCA, centred on the public mean, optionally divided
    by the public standard deviation (after a PCA this is whitening), and L2-normalised
    (cosine affinities); all of that is fitted on ``public_features`` only.

    Args:
        num_neighbors: neighbours per node (graph and affinities to the pool).
        power: affinity exponent γ in ``max(cos, 0)^γ``.
        alpha: propagation weight α in [0, 1).
        steps: T, terms of the truncated series Σ_{t ≤ T} (αS)^t.
        standardize: divide each centred feature by its public standard deviation.
        pca_dim: first keep this many principal components of the public features (None:
            all features; also when the features have no more columns than this).
    """

    def __init__(
        self,
        *,
        num_neighbors: int = 10,
        power: float = 3.0,
        alpha: float = 0.99,
        steps: int = 20,
        standardize: bool = True,
        pca_dim: int | None = None,
    ) -> None:
        self.num_neighbors = check_int("num_neighbors", num_neighbors, minimum=1)
        self.power = check_positive("power", power)
        self.alpha = check_real("alpha", alpha, low=0.0, high=1.0, high_inclusive=False)
        self.steps = check_int("steps", steps, minimum=0)
        self.standardize = bool(standardize)
        self.pca_dim = None if pca_dim is None else check_int("pca_dim", pca_dim, minimum=1)
        self.pca: PublicFeatures | None = None
        self.in_dim: int | None = None
        self.mean: Tensor | None = None
        self.std: Tensor | None = None
        self.pool: Tensor | None = None
        self.adjacency: Tensor | None = None

    def _normalise(self, features: Tensor) -> Tensor:
        if self.mean is None or self.std is None:
            raise RuntimeError("PoolGraph used before fit")
        f = check_tensor("features", features, ndim=2, floating=True).float()
        if f.shape[1] != self.in_dim:
            raise ValueError(f"features have {f.shape[1]} columns, the graph was fitted on {self.in_dim}")
        if self.pca is not None:
            f = self.pca.transform(f)
        return F.normalize((f - self.mean) / self.std, dim=1)

    def fit(self, public_features: Tensor) -> PoolGraph:
        """Build S = D^{-1/2} W D^{-1/2} from the public features (n_p, d); nothing else is used."""
        f = check_tensor("public_features", public_features, ndim=2, floating=True).float()
        if f.shape[0] <= self.num_neighbors:
            raise ValueError(f"need more than num_neighbors={self.num_neighbors} public points, got {f.shape[0]}")
        self.in_dim = f.shape[1]
        if self.pca_dim is not None and self.pca_dim < f.shape[1]:
            self.pca = PublicFeatures.fit(f, dim=self.pca_dim, whiten=False)
            f = self.pca.transform(f)
        self.mean = f.mean(0)
        self.std = f.std(0) + 1e-6 if self.standardize else torch.ones(f.shape[1], device=f.device)
        self.pool = F.normalize((f - self.mean) / self.std, dim=1)  # f is already reduced by the PCA
        w = knn_affinities(self.pool, self.pool, num_neighbors=self.num_neighbors, power=self.power, exclude_self=True)
        w = (w + w.t()).coalesce()  # symmetric
        degree = torch.sparse.sum(w, 1).to_dense().clamp(min=1e-12)
        i = w.indices()
        values = w.values() / (degree[i[0]] * degree[i[1]]).sqrt()
        self.adjacency = to_sparse_csr(sparse_coo(i, values, tuple(w.shape)))
        return self

    @property
    def device(self) -> torch.device:
        """Where the fitted graph is (and where it computes)."""
        if self.pool is None:
            raise RuntimeError("PoolGraph used before fit")
        return self.pool.device

    def to(self, device: str | torch.device) -> PoolGraph:
        """The fitted graph on ``device``: this graph if it is there, else a copy moved there once."""
        if self.pool is None or self.mean is None or self.std is None or self.adjacency is None:
            raise RuntimeError("PoolGraph used before fit")
        device = torch.device(device)
        if self.device == device:
            return self
        out = PoolGraph(num_neighbors=self.num_neighbors, power=self.power, alpha=self.alpha, steps=self.steps,
                        standardize=self.standardize, pca_dim=self.pca_dim)  # fmt: skip
        out.pca = None if self.pca is None else self.pca.to(device)
        out.in_dim, out.mean, out.std = self.in_dim, self.mean.to(device), self.std.to(device)
        out.pool, out.adjacency = self.pool.to(device), self.adjacency.to(device)
        return out

    def affinities(self, features: Tensor) -> Tensor:
        """Sparse (n, n_p) affinities of any points to their nearest pool points (on the graph's
        device; ``features`` are moved there, whole, if they are elsewhere)."""
        if self.pool is None:
            raise RuntimeError("PoolGraph used before fit")
        features = features.to(self.pool.device)
        return knn_affinities(self._normalise(features), self.pool, num_neighbors=self.num_neighbors, power=self.power)

    def propagate(self, query_features: Tensor) -> Tensor:
        """``M · a_q`` for every query, (n_p, n_query) float32: the queries' affinities spread
        over the pool graph. Column q depends only on query q (and public data)."""
        if self.adjacency is None:
            raise RuntimeError("PoolGraph used before fit")
        x = self.affinities(query_features).to_dense().T.contiguous()  # (n_p, n_q)
        spread = x.clone()
        for _ in range(self.steps):
            spread = self.alpha * (self.adjacency @ spread) + x
        return spread

    def kernel(self, private_features: Tensor, query_features: Tensor) -> Tensor:
        """K (n_private, n_query) float32: ``K[l, q] = a_l · M · a_q``."""
        spread = self.propagate(query_features)
        return to_sparse_csr(self.affinities(private_features)) @ spread  # (n_private, n_q)

    def state_dict(self) -> dict[str, Any]:
        """The settings and fitted tensors (on the CPU, wherever the graph is)."""
        if self.pool is not None and self.device.type != "cpu":
            return self.to("cpu").state_dict()
        return {
            "num_neighbors": self.num_neighbors,
            "power": self.power,
            "alpha": self.alpha,
            "steps": self.steps,
            "standardize": self.standardize,
            "pca": None if self.pca is None else self.pca.state_dict(),
            "in_dim": self.in_dim,
            "mean": self.mean,
            "std": self.std,
            "pool": self.pool,
            "adjacency": None if self.adjacency is None else self.adjacency.to_sparse_coo(),
        }


def kernel_votes(kernel: Tensor, labels: Tensor, shard_of: Tensor, *, num_teachers: int, num_classes: int) -> Tensor:
    """Each teacher's vote on each query from a kernel between private records and queries.

    Args:
        kernel: (n, m) nonnegative, ``kernel[l, q]`` between private record l and query q.
        labels: (n,) int64 private labels in {0, …, C − 1}.
        shard_of: (n,) int64 teacher of every record (:func:`pate_stab.teachers.shard_of_records`).
        num_teachers, num_classes: k and C.

    Returns:
        (k, m) int64: teacher j's argmax over c of the mean kernel to its records of class c.
    """
    scores = kernel_class_scores(kernel, labels, shard_of, num_teachers=num_teachers, num_classes=num_classes)
    return scores.argmax(-1)  # (k, m)


def kernel_class_scores(
    kernel: Tensor, labels: Tensor, shard_of: Tensor, *, num_teachers: int, num_classes: int
) -> Tensor:
    """Each teacher's class scores on each query: the mean kernel to its own records of each class.

    Arguments as :func:`kernel_votes`. Returns (k, m, C) in the kernel's dtype; teacher j's row
    is computed from the kernel rows of its own records only.
    """
    k = check_int("num_teachers", num_teachers, minimum=1)
    c = check_int("num_classes", num_classes, minimum=2)
    kernel = check_tensor("kernel", kernel, ndim=2, floating=True)
    labels = check_tensor("labels", labels, ndim=1, floating=False).long()
    shard_of = check_tensor("shard_of", shard_of, ndim=1, floating=False).long()
    if not (labels.shape[0] == shard_of.shape[0] == kernel.shape[0]):
        raise ValueError(f"kernel has {kernel.shape[0]} rows, labels {labels.shape[0]}, shard_of {shard_of.shape[0]}")
    if int(labels.min()) < 0 or int(labels.max()) >= c:
        raise ValueError(f"labels must lie in [0, {c - 1}]")
    if int(shard_of.min()) < 0 or int(shard_of.max()) >= k:
        raise ValueError(f"shard_of must lie in [0, {k - 1}]")
    bins = (shard_of * c + labels).to(kernel.device)  # (n,)
    m = kernel.shape[1]
    scores = torch.zeros(m, k * c, dtype=kernel.dtype, device=kernel.device).index_add_(1, bins, kernel.T.contiguous())
    ones = torch.ones_like(bins, dtype=kernel.dtype)
    counts = torch.zeros(k * c, dtype=kernel.dtype, device=kernel.device).index_add_(0, bins, ones)
    scores = scores / counts.clamp(min=1)
    return scores.view(m, k, c).transpose(0, 1)  # (k, m, C)

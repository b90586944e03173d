"""Label-propagation teachers: k teachers that vote through a kNN graph of the public pool.

Teacher j scores class c on a query q by the mean propagated kernel from q to its own records of
class c (:func:`pate_stab.features.propagation.kernel_class_scores`, Zhou et al. 2004 on the
public graph). The graph, its normalisation and the PCA before it are fitted on the public
pool's features only; a private record enters only through its own affinities to the pool, so
teacher j's votes depend on shard j (and public data) only — one changed record moves one
teacher, as for trained heads (DESIGN.md fact 2). Nothing is trained: building the ensemble
computes the graph and the private records' affinities once; votes are computed per query.

Queries that are not pool points (the evaluation split) are attached to the graph the same way
as pool queries: by their affinities to their nearest pool nodes. The graph itself is never
extended by them.

On a GPU (``device``) the public and private features move there once, whole; the graph, the
private affinities, the labels and the shard map stay there, queries are moved there whole, and
only the votes (or scores) come back to the CPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_tensor
from pate_stab.features.propagation import PoolGraph, kernel_class_scores, to_sparse_csr

__all__ = ["PropagationSpec", "PropagationTeachers"]


@dataclass(frozen=True)
class PropagationSpec:
    """The graph's settings (see :class:`~pate_stab.features.propagation.PoolGraph`).

    Defaults fixed in advance from Iscen et al. (2019) and their public code: k = 50, γ = 3,
    α = 0.99, 20 solver iterations (here 20 series terms), no PCA before the graph.
    """

    num_neighbors: int = 50
    power: float = 3.0
    alpha: float = 0.99
    steps: int = 20
    pca_dim: int | None = None
    kind: str = "propagate"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PropagationTeachers:
    """k label-propagation teachers over the public pool's kNN graph.

    Args:
        public_features: (n_p, d) features of the public pool: the only data the graph sees.
        private_features: (n, d) private records' features.
        private_labels: (n,) int64 labels.
        shards: ``shards[j]`` = indices of teacher j's records (:func:`pate_stab.teachers.partition_indices`).
        num_classes: C.
        spec: graph settings.
        chunk: queries per propagation batch.
        fitted_on: what ``public_features`` are, for the ensemble's ``config``. Under label privacy
            (DESIGN.md fact 13) the graph's nodes are the private and public inputs: every input is
            public there, and teacher j's votes still depend on shard j's labels only.
        device: where the graph is built and the votes are computed.
    """

    def __init__(
        self,
        public_features: Tensor,
        private_features: Tensor,
        private_labels: Tensor,
        shards: list[Tensor],
        *,
        num_classes: int,
        spec: PropagationSpec | None = None,
        chunk: int = 1024,
        fitted_on: str = "public pool features",
        device: str | torch.device = "cpu",
    ) -> None:
        self.spec = spec or PropagationSpec()
        self._num_classes = check_int("num_classes", num_classes, minimum=2)
        private_features = check_tensor("private_features", private_features, ndim=2, floating=True)
        self.labels = check_tensor("private_labels", private_labels, ndim=1, floating=False).long()
        if self.labels.shape[0] != private_features.shape[0]:
            raise ValueError("private_features and private_labels differ in length")
        if not shards:
            raise ValueError("need at least one shard")
        self.shard_of = torch.full((self.labels.shape[0],), -1, dtype=torch.int64)
        for j, shard in enumerate(shards):
            self.shard_of[shard.long()] = j
        if bool((self.shard_of < 0).any()):
            raise ValueError("every private record must belong to a shard")
        self._num_teachers = len(shards)
        self.chunk = check_int("chunk", chunk, minimum=1)
        self.labels, self.shard_of = self.labels.to(device), self.shard_of.to(device)
        s = self.spec
        self.graph = PoolGraph(
            num_neighbors=s.num_neighbors, power=s.power, alpha=s.alpha, steps=s.steps, pca_dim=s.pca_dim
        ).fit(public_features.to(device))  # public features only
        # (n, n_p) sparse: each row depends on its own record only
        self.private_affinities = to_sparse_csr(self.graph.affinities(private_features.to(device)))
        self.graph_nodes = int(public_features.shape[0])
        self.config: dict[str, Any] = {"graph": s.to_dict(), "fitted_on": fitted_on}

    @property
    def num_teachers(self) -> int:
        return self._num_teachers

    @property
    def num_classes(self) -> int:
        return self._num_classes

    @property
    def device(self) -> torch.device:
        """Where the graph is and the votes are computed."""
        return self.graph.device

    @torch.no_grad()
    def _scores(self, x: Tensor) -> Tensor:
        """(k, m, C) on the graph's device (``x`` moves there once, whole)."""
        x = check_tensor("x", x, ndim=2, floating=True).to(self.device)
        parts = []
        for start in range(0, x.shape[0], self.chunk):
            kernel = self.private_affinities @ self.graph.propagate(x[start : start + self.chunk])  # (n, b)
            parts.append(
                kernel_class_scores(
                    kernel, self.labels, self.shard_of, num_teachers=self.num_teachers, num_classes=self.num_classes
                )
            )
        if not parts:
            return torch.zeros(self.num_teachers, 0, self.num_classes, device=self.device)
        return torch.cat(parts, dim=1)  # (k, m, C)

    def predict_votes(self, x: Tensor, *, progress: bool = False, device: str | torch.device | None = None) -> Tensor:
        """Each teacher's class on each input: (k, m) int64 on the CPU (argmax of the mean kernel per
        class), computed where the graph is (:attr:`device`; ``x`` moves there once).

        ``progress`` and ``device`` are accepted for the common teacher interface; propagation votes
        take no bar, and run on the device the teachers were built on.
        """
        return self._scores(x).argmax(-1).cpu()

    def predict_scores(
        self, x: Tensor, *, binary: bool = False, progress: bool = False, device: str | torch.device | None = None
    ) -> Tensor:
        """Each teacher's class scores normalised to sum to 1 (uniform where a teacher has no
        affinity to the query): (k, m, C), or (k, m) the score of class 1 with ``binary=True``."""
        s = self._scores(x).float()
        total = s.sum(-1, keepdim=True)
        p = torch.where(total > 0, s / total.clamp(min=1e-30), torch.full_like(s, 1.0 / self.num_classes))
        if binary:
            if self.num_classes != 2:
                raise ValueError(f"binary=True needs two classes, these teachers have {self.num_classes}")
            return p[..., 1].cpu()
        return p.cpu()

"""Representatives of the public pool: one member per k-means cluster, public data only.

Round 0 of an adaptive selection and its class discovery ask about typical points spread over the
pool (:mod:`pate_stab.selection`): the member nearest each centroid of a k-means clustering
(:func:`kmeans_representatives`) or each cluster's densest member (:func:`dense_representatives`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from pate_stab._checks import check_generator, check_int, check_tensor
from pate_stab.vocabulary import REPRESENTATIVE_CHOICES, check_representatives

__all__ = [
    "DENSITY_NEIGHBOURS",
    "REPRESENTATIVE_CHOICES",
    "check_representatives",
    "dense_representatives",
    "kmeans_representatives",
]

# REPRESENTATIVE_CHOICES (which point stands for a k-means cluster in round 0 and class discovery) and its check
# are pate_stab.vocabulary's, which the run's configuration reads too
DENSITY_NEIGHBOURS = 10  # "dense": the k of the k-th-nearest-neighbour distance (fixed in advance)


def _kmeans_centroids(x: Tensor, num: int, generator: torch.Generator, iterations: int) -> Tensor:
    """(num, d) centroids of Lloyd's algorithm from a k-means++ start (Arthur & Vassilvitskii 2007)."""
    check_generator(generator)
    first = int(torch.randint(x.shape[0], (1,), generator=generator))
    centroids = x[first : first + 1].clone()  # (1, d), grows to (num, d)
    nearest = torch.cdist(x, centroids).squeeze(1) ** 2  # (n,) squared distance to the nearest centroid
    for _ in range(1, num):
        weights = nearest if bool((nearest > 0).any()) else torch.ones_like(nearest)
        pick = int(torch.multinomial(weights, 1, generator=generator))
        centroids = torch.cat([centroids, x[pick : pick + 1]])
        nearest = torch.minimum(nearest, ((x - x[pick]) ** 2).sum(1))
    for _ in range(iterations):
        assign = torch.cdist(x, centroids).argmin(1)  # (n,)
        sums = torch.zeros_like(centroids).index_add_(0, assign, x)
        counts = torch.bincount(assign, minlength=num).unsqueeze(1).double()
        centroids = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
    return centroids


def kmeans_representatives(x: Tensor, num: int, *, generator: torch.Generator, iterations: int = 20) -> Tensor:
    """Positions of ``num`` distinct rows of ``x`` nearest to the centroids of a k-means clustering.

    Lloyd's algorithm from a k-means++ start (Arthur & Vassilvitskii 2007: each initial centroid
    is a row drawn with probability ∝ its squared distance to the nearest one already chosen);
    each centroid is represented by its nearest row not already taken, so the result has
    ``min(num, len(x))`` distinct positions. Public data only.

    Args:
        x: (n, d) float features.
        num: number of clusters / representatives, ≥ 1.
        generator: draws the k-means++ start.
        iterations: Lloyd iterations.

    Returns:
        int64 positions into ``x``, in centroid order.
    """
    x = check_tensor("x", x, ndim=2, floating=True).double()
    centroids = _kmeans_centroids(x, min(check_int("num", num, minimum=1), x.shape[0]), generator, iterations)
    order = torch.cdist(centroids, x).argsort(dim=1, stable=True)  # (num, n) nearest rows first
    taken: set[int] = set()
    picks = []
    for row in order.tolist():
        pick = next(i for i in row if i not in taken)
        taken.add(pick)
        picks.append(pick)
    return torch.tensor(picks, dtype=torch.int64)


def dense_representatives(
    x: Tensor, num: int, *, generator: torch.Generator, iterations: int = 20, neighbours: int = DENSITY_NEIGHBOURS
) -> Tensor:
    """Positions of the densest member of each cluster of the k-means clustering of ``x``.

    The same clustering as :func:`kmeans_representatives` (the same generator draws give the same
    centroids, in the same order). Each cluster is represented by the member with the smallest
    distance to its ``neighbours``-th nearest other member of the same cluster — the k-nearest-neighbour
    density estimate (Loftsgaarden & Quesenberry 1965), highest density first — instead of the
    member nearest the centroid. A centroid of a cluster that straddles two classes can lie in the
    low-density valley between them, where an ensemble disagrees; the cluster's mode lies inside
    one class under the cluster assumption (Chapelle, Weston & Schölkopf 2003: class boundaries
    run through low-density regions). Distances within the cluster only (an interior point's
    within-cluster neighbours are its neighbours in ``x``; a border point's are farther, which
    only favours interior points). A cluster with at most ``neighbours`` members, or an empty one,
    falls back to the member nearest its centroid not already taken. Public data only: the
    features of the candidates, no label and no vote.

    Args:
        x: (n, d) float features.
        num: number of clusters / representatives, ≥ 1.
        generator: draws the k-means++ start.
        iterations: Lloyd iterations.
        neighbours: k of the k-th-nearest-neighbour distance, ≥ 1.

    Returns:
        int64 distinct positions into ``x``, in centroid order.
    """
    x = check_tensor("x", x, ndim=2, floating=True).double()
    neighbours = check_int("neighbours", neighbours, minimum=1)
    centroids = _kmeans_centroids(x, min(check_int("num", num, minimum=1), x.shape[0]), generator, iterations)
    assign = torch.cdist(x, centroids).argmin(1)  # (n,)
    taken: set[int] = set()
    picks = []
    for c in range(centroids.shape[0]):
        members = torch.nonzero(assign == c).flatten()
        if members.numel() > neighbours:
            block = x[members]
            # the k-th other member's distance, in row blocks (memory O(1024 · n_c)); column 0 is itself
            radius = torch.cat([torch.cdist(block[i : i + 1024], block).kthvalue(neighbours + 1, dim=1).values
                                for i in range(0, members.numel(), 1024)])  # fmt: skip
            order = members[radius.argsort(stable=True)].tolist()
        else:
            order = []
        fallback = torch.cdist(centroids[c : c + 1], x).squeeze(0).argsort(stable=True).tolist()
        pick = next(i for i in order + fallback if i not in taken)
        taken.add(pick)
        picks.append(pick)
    return torch.tensor(picks, dtype=torch.int64)

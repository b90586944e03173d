"""The ``"spread"`` query selection as one object: :class:`SpreadSelector` and its :class:`SpreadSettings`.

The selection itself is described in :mod:`pate_stab.selection`; its rounds are
:func:`~pate_stab.selection.adaptive_batches.release_in_adaptive_batches`'s. Post-processing:
public inputs and released outputs only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_tensor
from pate_stab.features.propagation import PoolGraph
from pate_stab.selection.adaptive_batches import SelectionResult, answered_mask, release_in_adaptive_batches
from pate_stab.student.spreading import spread_labels
from pate_stab.vocabulary import (
    GRAPH_ALPHA,
    GRAPH_NEIGHBORS,
    GRAPH_PCA_DIM,
    GRAPH_POWER,
    GRAPH_STEPS,
    SELECTION_COVERAGE,
    SELECTION_REPRESENTATIVES,
    SELECTION_ROUND_SIZE,
)

__all__ = ["SPREAD_DEFAULTS", "SpreadSelector", "SpreadSettings"]


@dataclass(frozen=True)
class SpreadSettings:
    """The settings of the ``"spread"`` selection: the public pool's kNN graph, the spreading, the rounds.

    The field names are the main job's configuration keys (:class:`~pate_stab.run.config.TransferConfig`,
    whose defaults for them are :data:`SPREAD_DEFAULTS`). The graph settings are fixed in advance from
    Iscen, Tolias, Avrithis & Chum (2019), "Label propagation for deep semi-supervised learning" (CVPR;
    the affinity max(cos, 0)^γ is theirs), as their public code (LP-DeepSSL, ``update_plabels``) runs
    it: k = 50 neighbours, γ = 3, α = 0.99 (also Zhou et al. 2004's α), 20 iterations of the solver
    (here: 20 terms of the series, the same number of sparse products), the graph on the features as
    they are (no extra PCA). No label of the pool or the evaluation split chose them, nor the round
    size and coverage.
    """

    graph_neighbors: int = GRAPH_NEIGHBORS  # kNN graph degree
    graph_power: float = GRAPH_POWER  # affinity exponent γ in max(cos, 0)^γ
    graph_alpha: float = GRAPH_ALPHA  # propagation weight α in [0, 1)
    graph_steps: int = GRAPH_STEPS  # terms of the series Σ (αS)^t
    graph_pca_dim: int | None = GRAPH_PCA_DIM  # public PCA of the features before the graph (None: none)
    selection_round_size: int = SELECTION_ROUND_SIZE  # the first round's size and the smallest round
    selection_coverage: float = SELECTION_COVERAGE  # share of each round for confident, not yet covered points
    # which member stands for a k-means cluster in round 0 and class discovery: "centroid" or "dense"
    selection_representatives: str = SELECTION_REPRESENTATIVES

    @classmethod
    def of(cls, config: Any) -> SpreadSettings:
        """The settings of a run's configuration: a ``TransferConfig``, read through its ``setting`` (the
        selection does not import the configuration, which holds these in its graph and selection sections)."""
        return cls(**{f.name: config.setting(f.name) for f in fields(cls)})

    def pool_graph(self, x: Tensor) -> PoolGraph:
        """The kNN graph of the public points' (n, d) inputs ``x`` (public data only), built where ``x`` is."""
        return PoolGraph(
            num_neighbors=self.graph_neighbors, power=self.graph_power, alpha=self.graph_alpha,
            steps=self.graph_steps, pca_dim=self.graph_pca_dim,
        ).fit(x)  # fmt: skip


SPREAD_DEFAULTS = SpreadSettings()
"""The spread selection's defaults: the main job's (``TransferConfig``'s) and ``release --votes``'."""


class SpreadSelector:
    """The ``"spread"`` selection (module docstring): one object for the main job and ``release --votes``.

    It holds the public pool's kNN graph and its :class:`SpreadSettings`. Called with (queried
    positions, released outputs), it spreads the answered labels and the ⊥ (an extra class C; a soft
    output counts as the class it rounds to) over the graph
    (:func:`pate_stab.student.spreading.spread_labels`, α and steps from the settings) and returns the
    (n, C + 1) shares over the whole pool (⊥ last) and the (n,) mass, on the CPU: the
    :data:`SpreadFn` of :func:`release_in_adaptive_batches`. :meth:`select` runs the rounds with the settings'
    round size and coverage. Post-processing: public inputs and released outputs only.

    Args:
        graph: the public pool's fitted kNN graph; the spreading computes where it is.
        num_classes: C, the released labels' declared range.
        settings: where its α and steps, round size and coverage come from.
        on_spread: called after each spread (the main job records the selection's device with it).
    """

    def __init__(
        self,
        graph: PoolGraph,
        *,
        num_classes: int,
        settings: SpreadSettings = SPREAD_DEFAULTS,
        on_spread: Callable[[], None] | None = None,
    ) -> None:
        if graph.adjacency is None:
            raise ValueError("the spread selection needs a fitted pool graph")
        self.graph = graph
        self.adjacency: Tensor = graph.adjacency
        self.num_classes = check_int("num_classes", num_classes, minimum=2)
        self.settings = settings
        self.on_spread = on_spread

    @classmethod
    def from_inputs(
        cls, pool_x: Tensor, *, num_classes: int, settings: SpreadSettings = SPREAD_DEFAULTS, device: Any = None
    ) -> SpreadSelector:
        """A selector on the graph of the public points' inputs ``pool_x`` (rows flattened), built on
        ``device`` (default: where ``pool_x`` is)."""
        x = check_tensor("pool_x", pool_x, floating=True).flatten(1).float()
        return cls(settings.pool_graph(x if device is None else x.to(device)), num_classes=num_classes,
                   settings=settings)  # fmt: skip

    def __call__(self, index: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
        c = self.num_classes
        hard = (labels >= 0.5).long() if labels.is_floating_point() else labels.long()
        classes = torch.where(answered_mask(labels), hard, torch.full_like(hard, c))  # ⊥ → class C
        # spread where the graph is (the round's seeds move there); the selection reads the shares on the CPU
        proba, mass = spread_labels(self.adjacency, index, classes, num_classes=c + 1,
                                    alpha=self.settings.graph_alpha, steps=self.settings.graph_steps)  # fmt: skip
        if self.on_spread is not None:
            self.on_spread()
        return proba.cpu(), mass.cpu()

    def select(
        self,
        pool_x: Tensor,
        *,
        num_queries: int,
        release: Callable[[Tensor], Tensor],
        halted: Callable[[], bool],
        max_unstable: int | None,
        generator: torch.Generator,
    ) -> SelectionResult:
        """The spread selection of up to ``num_queries`` of the pool ``pool_x`` (the graph's nodes):
        :func:`release_in_adaptive_batches` with this selector, its round size and its coverage."""
        return release_in_adaptive_batches(
            pool_x, num_queries=num_queries, strategy="spread", release=release, halted=halted, spread=self,
            coverage=self.settings.selection_coverage, round_size=self.settings.selection_round_size,
            max_unstable=max_unstable, generator=generator,
            representatives=self.settings.selection_representatives,
        )  # fmt: skip

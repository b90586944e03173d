"""The public-pool projection: a PCA (optionally whitened) fitted on the public pool only.

:class:`PublicFeatures` never sees private data, so it costs no privacy (DESIGN.md fact 6: what
shapes the features comes from public information). The extractors of this package use it as
their optional PCA stage (:class:`~pate_stab.features.base.PublicProjection`); teachers reduced
to small heads on its output train on a few dozen examples each (DESIGN.md, "Why k must be
large").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from pate_stab._validation import check_int, check_positive, check_tensor

__all__ = ["PublicFeatures"]


@dataclass
class PublicFeatures:
    """PCA (optionally whitened) fitted on the public pool only; never sees private data.

    ``transform(x) = ((flatten(x) − mean) @ components.T) / scale`` with ``scale`` the
    component standard deviations when whitening (else 1).

    Example::

        feats = PublicFeatures.fit(public_x, dim=50)
        teachers = train_teachers(feats.transform(private_x), private_y, …)
        votes = teachers.predict_votes(feats.transform(public_x))
    """

    mean: Tensor
    components: Tensor  # (dim, D)
    scale: Tensor  # (dim,)
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fit(cls, public_x: Tensor, *, dim: int, whiten: bool = True, eps: float = 1e-6) -> PublicFeatures:
        """Fit on the public pool ``public_x`` (n, …) — never pass private data here.

        Args:
            public_x: public inputs, flattened to (n, D).
            dim: number of principal components kept, 1 ≤ dim ≤ min(n, D).
            whiten: divide each component by its standard deviation (plus ``eps``).
            eps: added to the standard deviations when whitening.
        """
        x = check_tensor("public_x", public_x, floating=True).flatten(1).to(torch.float64)
        dim = check_int("dim", dim, minimum=1, maximum=min(x.shape))
        eps = check_positive("eps", eps)
        mean = x.mean(0)
        _, s, vh = torch.linalg.svd(x - mean, full_matrices=False)
        std = s[:dim] / math.sqrt(max(x.shape[0] - 1, 1))
        scale = std + eps if whiten else torch.ones(dim, dtype=torch.float64)
        return cls(
            mean=mean.float(),
            components=vh[:dim].float(),
            scale=scale.float(),
            meta={"dim": dim, "whiten": whiten, "eps": eps, "fitted_on": "public"},
        )

    def transform(self, x: Tensor) -> Tensor:
        """(n, …) → (n, dim) float32."""
        x = check_tensor("x", x, floating=True).flatten(1).to(torch.float32)
        if x.shape[1] != self.mean.shape[0]:
            raise ValueError(f"x has {x.shape[1]} features, the PCA was fitted on {self.mean.shape[0]}")
        return ((x - self.mean) @ self.components.T) / self.scale

    def state_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "components": self.components,
            "scale": self.scale,
            "meta": self.meta,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PublicFeatures:
        return cls(state["mean"], state["components"], state["scale"], dict(state.get("meta", {})))

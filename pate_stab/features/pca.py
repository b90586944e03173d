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

from pate_stab._checks import check_int, check_pca_dim, check_positive, check_tensor

__all__ = ["PublicFeatures", "check_pca_dim", "components_for_share"]


def components_for_share(singular_values: Tensor, share: float) -> int:
    """The fewest leading components whose variance is at least ``share`` of the total.

    Variance of component i ∝ s_i² (the singular values of the centred data, in decreasing
    order); the rule reads nothing but these public singular values.

    Example:
        >>> components_for_share(torch.tensor([3.0, 2.0, 1.0, 0.0]), 0.9)
        2
    """
    var = singular_values.to(torch.float64) ** 2
    total = float(var.sum())
    if total <= 0:
        return 1
    cumulative = torch.cumsum(var, 0) / total
    # a tiny slack so that a share met exactly is not lost to rounding
    return min(int((cumulative < share - 1e-12).sum()) + 1, int(var.numel()))


@dataclass
class PublicFeatures:
    """PCA (optionally whitened) fitted on the public pool only; never sees private data.

    ``transform(x) = ((flatten(x) − mean) @ components.T) / scale`` with ``scale`` the
    component standard deviations when whitening (else 1).

    ``fit`` computes on the device of its input (a GPU: the SVD runs there) and keeps the fitted
    tensors there; ``transform`` computes on the device of its input (the fitted tensors are
    moved there if they are elsewhere); :meth:`state_dict` gives CPU tensors.

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
    def fit(cls, public_x: Tensor, *, dim: int | float, whiten: bool = True, eps: float = 1e-6) -> PublicFeatures:
        """Fit on the public pool ``public_x`` (n, …) — never pass private data here.

        Args:
            public_x: public inputs, flattened to (n, D).
            dim: number of principal components kept, 1 ≤ dim ≤ min(n, D); or a float in (0, 1):
                keep the fewest components holding that share of the public pool's variance
                (:func:`components_for_share`; a function of the public inputs alone).
            whiten: divide each component by its standard deviation (plus ``eps``).
            eps: added to the standard deviations when whitening.
        """
        x = check_tensor("public_x", public_x, floating=True).flatten(1).to(torch.float64)
        requested = check_pca_dim("dim", dim)
        if isinstance(requested, int):
            check_int("dim", requested, minimum=1, maximum=min(x.shape))
        eps = check_positive("eps", eps)
        mean = x.mean(0)
        _, s, vh = torch.linalg.svd(x - mean, full_matrices=False)
        dim = requested if isinstance(requested, int) else components_for_share(s, requested)
        std = s[:dim] / math.sqrt(max(x.shape[0] - 1, 1))
        scale = std + eps if whiten else torch.ones(dim, dtype=torch.float64, device=x.device)
        return cls(
            mean=mean.float(),
            components=vh[:dim].float(),
            scale=scale.float(),
            meta={"dim": dim, "requested": requested, "whiten": whiten, "eps": eps, "fitted_on": "public"},
        )

    def transform(self, x: Tensor) -> Tensor:
        """(n, …) → (n, dim) float32."""
        x = check_tensor("x", x, floating=True).flatten(1).to(torch.float32)
        if x.shape[1] != self.mean.shape[0]:
            raise ValueError(f"x has {x.shape[1]} features, the PCA was fitted on {self.mean.shape[0]}")
        fitted = self.to(x.device)
        return ((x - fitted.mean) @ fitted.components.T) / fitted.scale

    def to(self, device: str | torch.device) -> PublicFeatures:
        """This PCA with its tensors on ``device`` (itself if they are there)."""
        device = torch.device(device)
        if self.mean.device == device:
            return self
        return PublicFeatures(self.mean.to(device), self.components.to(device), self.scale.to(device), self.meta)

    def state_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean.cpu(),
            "components": self.components.cpu(),
            "scale": self.scale.cpu(),
            "meta": self.meta,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PublicFeatures:
        return cls(state["mean"], state["components"], state["scale"], dict(state.get("meta", {})))

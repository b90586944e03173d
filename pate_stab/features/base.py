"""The feature-extractor interface and the public-only projection shared by the extractors.

Every extractor follows one small contract (:class:`FeatureExtractor`):

* ``fit(public_x) -> self`` sees the *public* pool only (never private data); it is a no-op for
  data-independent maps. Whatever it learns comes from the tensor passed in and nothing else.
* ``transform(x) -> Tensor`` maps any inputs (private included) to (n, d) float32; row i
  depends only on ``x[i]`` (no batch statistics), so a teacher's features depend only on its
  own records.
* ``state_dict()`` / ``load_state_dict(state)`` save and restore what ``fit`` learned.
* ``meta`` describes the extractor for a report: name, output dimension, what it was fitted on.

:class:`PublicProjection` is the optional "standardise, then PCA" stage fitted on the public
pool's base features; the PCA is :class:`pate_stab.features.pca.PublicFeatures`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from pate_stab._checks import check_positive, check_tensor
from pate_stab.features.pca import PublicFeatures, check_pca_dim

__all__ = ["FeatureExtractor", "PublicProjection", "check_images", "NotFittedError"]


class NotFittedError(RuntimeError):
    """``transform`` was called on an extractor that needs ``fit`` first."""


@runtime_checkable
class FeatureExtractor(Protocol):
    """A privacy-free feature map: fitted on public data only, or on none."""

    name: str

    def fit(self, public_x: Tensor) -> FeatureExtractor: ...

    def transform(self, x: Tensor) -> Tensor: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    @property
    def meta(self) -> dict[str, Any]: ...


def check_images(name: str, x: Any, *, shape: tuple[int, ...] | None = None) -> Tensor:
    """Images as float32 (n, C, H, W); (n, H, W) gets a channel axis.

    Raises:
        TypeError: not a floating tensor.
        ValueError: wrong rank, NaN/inf entries, empty, or per-image shape ≠ ``shape``.
    """
    x = check_tensor(name, x, ndim=(3, 4), floating=True)
    if x.dim() == 3:
        x = x[:, None]
    if shape is not None and tuple(x.shape[1:]) != tuple(shape):
        raise ValueError(f"{name} has images of shape {tuple(x.shape[1:])}, expected {tuple(shape)}")
    return x.float()


class PublicProjection:
    """Optional standardisation followed by optional PCA, both fitted on public features only.

    Args:
        standardize: subtract the per-feature public mean and divide by the public standard
            deviation (plus ``eps``).
        pca_dim: keep this many principal components of the (standardised) public features, or
            a float in (0, 1): the fewest components holding that share of their variance;
            None keeps all features.
        whiten: divide each component by its public standard deviation.
        eps: added to standard deviations.

    ``fit`` and ``transform`` compute on the device of their input (on a GPU: the statistics,
    SVD and projection run there; fitted tensors are moved to the input's device when they are
    elsewhere); :meth:`state_dict` gives CPU tensors.
    """

    def __init__(
        self,
        *,
        standardize: bool = True,
        pca_dim: int | float | None = None,
        whiten: bool = False,
        eps: float = 1e-6,
    ) -> None:
        self.standardize = bool(standardize)
        self.pca_dim = None if pca_dim is None else check_pca_dim("pca_dim", pca_dim)
        self.whiten = bool(whiten)
        self.eps = check_positive("eps", eps)
        self.mean: Tensor | None = None
        self.std: Tensor | None = None
        self.pca: PublicFeatures | None = None
        self.in_dim: int | None = None

    def fit(self, public_features: Tensor) -> PublicProjection:
        """Fit on (n, D) public features; uses nothing but this tensor."""
        f = check_tensor("public_features", public_features, ndim=2, floating=True).to(torch.float64)
        self.in_dim = f.shape[1]
        if self.standardize:
            self.mean = f.mean(0)
            self.std = f.std(0, unbiased=True) if f.shape[0] > 1 else torch.ones_like(self.mean)
            f = (f - self.mean) / (self.std + self.eps)
        if self.pca_dim is not None:
            if isinstance(self.pca_dim, int) and self.pca_dim > min(f.shape):
                raise ValueError(f"pca_dim={self.pca_dim} exceeds min(n, D) = {min(f.shape)} of the public features")
            self.pca = PublicFeatures.fit(f.float(), dim=self.pca_dim, whiten=self.whiten, eps=self.eps)
        return self

    @property
    def fitted(self) -> bool:
        return self.in_dim is not None

    @property
    def out_dim(self) -> int | None:
        """The output width: the components kept (known after ``fit`` for a variance share)."""
        if self.pca is not None:
            return int(self.pca.components.shape[0])
        if self.pca_dim is None:
            return self.in_dim
        return self.pca_dim if isinstance(self.pca_dim, int) else None

    def transform(self, features: Tensor) -> Tensor:
        """(n, D) → (n, out_dim) float32, row by row."""
        if not self.fitted:
            raise NotFittedError("PublicProjection.transform called before fit")
        f = check_tensor("features", features, ndim=2, floating=True)
        if f.shape[1] != self.in_dim:
            raise ValueError(f"features have {f.shape[1]} columns, the projection was fitted on {self.in_dim}")
        if self.mean is not None and self.std is not None:
            mean, std = self.mean.to(f.device), self.std.to(f.device)
            f = ((f.to(torch.float64) - mean) / (std + self.eps)).float()
        if self.pca is not None:
            f = self.pca.transform(f)
        return f.float()

    def state_dict(self) -> dict[str, Any]:
        return {
            "standardize": self.standardize,
            "pca_dim": self.pca_dim,
            "whiten": self.whiten,
            "eps": self.eps,
            "in_dim": self.in_dim,
            "mean": None if self.mean is None else self.mean.cpu(),
            "std": None if self.std is None else self.std.cpu(),
            "pca": None if self.pca is None else self.pca.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("standardize", "pca_dim", "whiten"):
            if state[key] != getattr(self, key):
                raise ValueError(f"state has {key}={state[key]!r}, this projection {getattr(self, key)!r}")
        self.eps, self.in_dim, self.mean, self.std = state["eps"], state["in_dim"], state["mean"], state["std"]
        self.pca = None if state["pca"] is None else PublicFeatures.from_state_dict(state["pca"])

"""The feature extractors: raw pixels, public PCA, scattering (+ public projection), SSL encoder.

All follow :class:`pate_stab.features.base.FeatureExtractor`. Nothing here ever sees a label,
and ``fit`` sees only the public images passed to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_generator, check_int
from pate_stab.features.base import NotFittedError, PublicProjection, check_images
from pate_stab.features.pca import PublicFeatures
from pate_stab.features.scattering import ScatteringFilters, scattering2d, scattering_filters, scattering_shape
from pate_stab.features.ssl import ConvEncoder, SSLConfig, encode, train_ssl_encoder

__all__ = ["RawFeatures", "PCAFeatures", "ScatteringFeatures", "SSLFeatures"]


class RawFeatures:
    """Flattened pixels; data-independent (``fit`` only records the image shape)."""

    name = "raw"

    def __init__(self) -> None:
        self.image_shape: tuple[int, ...] | None = None

    def fit(self, public_x: Tensor) -> RawFeatures:
        self.image_shape = tuple(check_images("public_x", public_x).shape[1:])
        return self

    def transform(self, x: Tensor) -> Tensor:
        return check_images("x", x, shape=self.image_shape).flatten(1)

    def state_dict(self) -> dict[str, Any]:
        return {"image_shape": self.image_shape}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.image_shape = None if state["image_shape"] is None else tuple(state["image_shape"])

    @property
    def meta(self) -> dict[str, Any]:
        dim = None if self.image_shape is None else int(torch.tensor(self.image_shape).prod())
        return {"name": self.name, "dim": dim, "fitted_on": "nothing (data-independent)"}


class PCAFeatures:
    """PCA of the pixels (optionally whitened) fitted on the public pool: a thin wrapper of
    :class:`pate_stab.features.PublicFeatures`."""

    name = "pca"

    def __init__(self, dim: int = 50, *, whiten: bool = True) -> None:
        self.dim = check_int("dim", dim, minimum=1)
        self.whiten = bool(whiten)
        self.pca: PublicFeatures | None = None
        self.num_public: int | None = None

    def fit(self, public_x: Tensor) -> PCAFeatures:
        x = check_images("public_x", public_x)
        self.pca = PublicFeatures.fit(x, dim=self.dim, whiten=self.whiten)
        self.num_public = x.shape[0]
        return self

    def transform(self, x: Tensor) -> Tensor:
        if self.pca is None:
            raise NotFittedError("PCAFeatures.transform called before fit")
        return self.pca.transform(check_images("x", x))

    def state_dict(self) -> dict[str, Any]:
        return {
            "dim": self.dim,
            "whiten": self.whiten,
            "num_public": self.num_public,
            "pca": None if self.pca is None else self.pca.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if (state["dim"], state["whiten"]) != (self.dim, self.whiten):
            raise ValueError(f"state is for dim={state['dim']}, whiten={state['whiten']}")
        self.num_public = state["num_public"]
        self.pca = None if state["pca"] is None else PublicFeatures.from_state_dict(state["pca"])

    @property
    def meta(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dim": self.dim,
            "whiten": self.whiten,
            "fitted_on": f"public pool ({self.num_public} images)" if self.num_public else "not fitted",
        }


class ScatteringFeatures:
    """Order-2 wavelet scattering (data-independent), flattened, then the optional public
    projection (standardise + PCA fitted on the public pool's scattering coefficients).

    Args:
        J, L: scattering scales and angles (Tramèr & Boneh 2021 use J = 2, L = 8 on 28×28).
        standardize, pca_dim, whiten: the :class:`PublicProjection`; with ``standardize=False``
            and ``pca_dim=None`` the extractor needs no data at all.
        batch_size, progress: passed to :func:`scattering2d`.
        device: where the transform and the public projection run (``"cuda"`` on a GPU): the images
            move there once, the projected features come back to the CPU once.
    """

    name = "scattering"

    def __init__(
        self,
        *,
        J: int = 2,
        L: int = 8,
        standardize: bool = True,
        pca_dim: int | None = 300,
        whiten: bool = False,
        batch_size: int = 256,
        progress: bool = False,
        device: str | torch.device = "cpu",
    ) -> None:
        self.J, self.L = check_int("J", J, minimum=1), check_int("L", L, minimum=1)
        self.projection = PublicProjection(standardize=standardize, pca_dim=pca_dim, whiten=whiten)
        self.batch_size, self.progress = batch_size, progress
        self.device = torch.device(device)
        self.image_shape: tuple[int, ...] | None = None
        self.num_public: int | None = None
        self._filters: ScatteringFilters | None = None

    @property
    def needs_fit(self) -> bool:
        return self.projection.standardize or self.projection.pca_dim is not None

    def _scatter(self, x: Tensor) -> Tensor:
        """The coefficients on ``device``."""
        x = check_images("x", x, shape=self.image_shape)
        if self._filters is None or self.image_shape != tuple(x.shape[1:]):
            self._filters = scattering_filters(tuple(x.shape[-2:]), J=self.J, L=self.L)
        # the whole set moves to the device once; scattering2d batches there, on the images' device
        s = scattering2d(x.to(self.device), filters=self._filters, batch_size=self.batch_size, progress=self.progress)
        return s.flatten(1)

    def scatter(self, x: Tensor) -> Tensor:
        """The data-independent part: (n, C, H, W) → (n, C·K·h·w) scattering coefficients (on the CPU)."""
        return self._scatter(x).cpu()

    def fit(self, public_x: Tensor) -> ScatteringFeatures:
        x = check_images("public_x", public_x)
        self.image_shape = tuple(x.shape[1:])
        self.num_public = x.shape[0]
        if self.needs_fit:
            self.projection.fit(self._scatter(x))  # on the device, where the coefficients are
        return self

    def transform(self, x: Tensor) -> Tensor:
        """(n, …) images → (n, d) features on the CPU (computed on ``device``)."""
        s = self._scatter(x)
        if not self.needs_fit:
            return s.cpu()
        if not self.projection.fitted:
            raise NotFittedError("ScatteringFeatures.transform called before fit")
        return self.projection.transform(s).cpu()

    def state_dict(self) -> dict[str, Any]:
        return {
            "J": self.J,
            "L": self.L,
            "image_shape": self.image_shape,
            "num_public": self.num_public,
            "projection": self.projection.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if (state["J"], state["L"]) != (self.J, self.L):
            raise ValueError(f"state is for J={state['J']}, L={state['L']}")
        self.image_shape = None if state["image_shape"] is None else tuple(state["image_shape"])
        self.num_public = state["num_public"]
        self.projection.load_state_dict(state["projection"])

    @property
    def meta(self) -> dict[str, Any]:
        base = None
        if self.image_shape is not None:
            k, h, w = scattering_shape(tuple(self.image_shape[-2:]), J=self.J, L=self.L)
            base = self.image_shape[0] * k * h * w
        p = self.projection
        return {
            "name": self.name,
            "J": self.J,
            "L": self.L,
            "scattering_dim": base,
            "standardize": p.standardize,
            "pca_dim": p.pca_dim,
            "whiten": p.whiten,
            "dim": p.out_dim if p.out_dim is not None else base,
            "fitted_on": f"public pool ({self.num_public} images)" if self.needs_fit else "nothing",
        }


class SSLFeatures:
    """A SimCLR-trained CNN encoder (:mod:`pate_stab.features.ssl`), trained on the public
    images only, frozen, then the optional public projection of its embedding.

    Args:
        config: encoder and training settings.
        generator: all randomness of the encoder training (required by ``fit``).
        checkpoint: per-epoch training checkpoint (resumed if present).
        standardize, pca_dim, whiten: the :class:`PublicProjection` of the embedding.
        progress: tqdm bars for training and encoding.
        device: where the encoder trains and encodes and the projection is fitted and applied
            (``"cuda"`` on a GPU): each set of images moves there once, its features come back to
            the CPU once.
    """

    name = "ssl"

    def __init__(
        self,
        config: SSLConfig | None = None,
        *,
        generator: torch.Generator | None = None,
        checkpoint: str | Path | None = None,
        standardize: bool = True,
        pca_dim: int | None = None,
        whiten: bool = False,
        progress: bool = False,
        device: str | torch.device = "cpu",
    ) -> None:
        self.config = config or SSLConfig()
        self.device = torch.device(device)
        self.generator = generator
        self.checkpoint = checkpoint
        self.projection = PublicProjection(standardize=standardize, pca_dim=pca_dim, whiten=whiten)
        self.progress = progress
        self.encoder: ConvEncoder | None = None
        self.history: list[float] = []
        self.image_shape: tuple[int, ...] | None = None
        self.num_public: int | None = None

    def fit(self, public_x: Tensor) -> SSLFeatures:
        if self.generator is None:
            raise TypeError("SSLFeatures.fit needs generator= (a torch.Generator) at construction")
        check_generator(self.generator)
        x = check_images("public_x", public_x)
        self.image_shape, self.num_public = tuple(x.shape[1:]), x.shape[0]
        x = x.to(self.device)  # once: the encoder trains on it, then embeds it for the projection
        self.encoder, self.history = train_ssl_encoder(
            x, self.config, generator=self.generator, checkpoint=self.checkpoint, progress=self.progress,
            device=self.device,
        )  # fmt: skip
        if self.projection.standardize or self.projection.pca_dim is not None:
            self.projection.fit(self.embed(x))
        return self

    def embed(self, x: Tensor) -> Tensor:
        """The frozen encoder's embedding (n, embed_dim), on the encoder's device."""
        if self.encoder is None:
            raise NotFittedError("SSLFeatures used before fit (or load_state_dict)")
        x = check_images("x", x, shape=self.image_shape)
        return encode(self.encoder, x, progress=self.progress, device=self.device)

    def transform(self, x: Tensor) -> Tensor:
        """(n, …) images → (n, d) features on the CPU (computed on ``device``)."""
        h = self.embed(x)
        return (self.projection.transform(h) if self.projection.fitted else h).cpu()

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "image_shape": self.image_shape,
            "num_public": self.num_public,
            "encoder": None if self.encoder is None else {k: v.cpu() for k, v in self.encoder.state_dict().items()},
            "history": list(self.history),
            "projection": self.projection.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["config"] != self.config.to_dict():
            raise ValueError("state was written with another SSLConfig")
        self.image_shape = tuple(state["image_shape"])
        self.num_public, self.history = state["num_public"], list(state["history"])
        self.encoder = ConvEncoder(self.image_shape[0], width=self.config.width, embed_dim=self.config.embed_dim)
        self.encoder.load_state_dict(state["encoder"])
        self.encoder.to(self.device).eval()
        self.projection.load_state_dict(state["projection"])

    @property
    def meta(self) -> dict[str, Any]:
        p = self.projection
        return {
            "name": self.name,
            "config": self.config.to_dict(),
            "embed_dim": self.config.embed_dim,
            "standardize": p.standardize,
            "pca_dim": p.pca_dim,
            "whiten": p.whiten,
            "dim": p.out_dim if p.out_dim is not None else self.config.embed_dim,
            "final_loss": self.history[-1] if self.history else None,
            "fitted_on": f"public pool ({self.num_public} images, no labels)" if self.num_public else "not fitted",
        }

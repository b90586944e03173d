"""The run's data: private training set, public query pool and evaluation split, in the teachers' input space.

``threat_model="public-pool"`` (BTT18 §4.2 scenario (i)): the whole training set is private and
an unlabelled public pool comes from the same distribution. ``"label-only"`` (scenario (ii)):
part of the training set has its labels discarded and becomes the public pool. Feature maps
(PCA, standardisation) are fitted on the public pool only; the extracted features (scattering,
SSL) are computed later by :func:`pate_stab.run.features.extract_features`, once the run folder
that caches them has been checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pate_stab.data import (
    load_adult,
    load_cifar10,
    load_fashion_mnist,
    load_mnist,
    load_svhn,
    make_gaussian_mixture,
    pate_split,
    random_split_indices,
    standardize,
)
from pate_stab.run.config import TransferConfig
from pate_stab.teachers import PublicFeatures

__all__ = ["Task", "load_task"]


@dataclass
class Task:
    """Inputs are already in the teachers' feature space; labels of ``public_y`` are for reporting."""

    private_x: Tensor
    private_y: Tensor
    public_x: Tensor
    public_y: Tensor
    eval_x: Tensor
    eval_y: Tensor
    num_classes: int
    threat_model: str
    feature_map: dict[str, Any] = field(default_factory=dict)
    # the public pool's and the evaluation split's images, kept when the inputs above are
    # features of them (the fixmatch student trains on images); None for non-image data
    public_images: Tensor | None = None
    eval_images: Tensor | None = None
    # one int64 id per private record, supplied with the data (a column or an array) and kept by a
    # neighbouring data set; None when the source has none. ``partition_key: record_id`` hashes
    # these; row numbers are never used (removing a record would renumber every later one)
    private_ids: Tensor | None = None


def _require_dir(config: TransferConfig) -> Path:
    if config.data_dir is None:
        raise FileNotFoundError(f"dataset {config.dataset!r} needs a data directory (data_dir / --data-dir)")
    path = Path(config.data_dir)
    if not path.is_dir() and not config.download:
        raise FileNotFoundError(f"data directory {path} does not exist")
    return path


def _raw_splits(config: TransferConfig, generator: torch.Generator) -> tuple[list[Tensor], int]:
    """(private_x, private_y, public_x, public_y, eval_x, eval_y), num_classes; public-pool scenario."""
    if config.dataset == "synthetic":
        n = config.num_private + config.num_public + config.num_eval
        x, y = make_gaussian_mixture(
            n,
            num_classes=config.num_classes,
            dim=config.dim,
            separation=config.separation,
            noise_rate=config.label_noise,
            generator=generator,
        )
        a, b = config.num_private, config.num_private + config.num_public
        return [x[:a], y[:a], x[a:b], y[a:b], x[b:], y[b:]], config.num_classes
    path = _require_dir(config)
    if config.dataset == "adult":
        # the official split is by file: adult.data is private; adult.test (public) gives the pool
        # (its first half) and the evaluation split; the published schema fixes every column
        train = load_adult(path, part="train", norm=None)
        test = load_adult(path, part="test", norm=None)
        half = len(test) // 2
        return [train.x, train.y, test.x[:half], test.y[:half], test.x[half:], test.y[half:]], 2
    loader = {"mnist": load_mnist, "fashion_mnist": load_fashion_mnist, "svhn": load_svhn, "cifar10": load_cifar10}
    splits = pate_split(loader[config.dataset](path, download=config.download))
    s = splits
    return [s.private.x, s.private.y, s.public.x, s.public.y, s.evaluation.x, s.evaluation.y], splits.num_classes


def load_task(config: TransferConfig, *, generator: torch.Generator) -> Task:
    """The three splits in the teachers' input space (features fitted on public data only).

    Raises:
        FileNotFoundError: missing data directory or files.
    """
    (px, py, ux, uy, ex, ey), num_classes = _raw_splits(config, generator)
    ids: Tensor | None = None  # the bundled data sets carry no record ids
    if config.threat_model == "label-only":
        # BTT18 §4.2 (ii): no public pool; discard the labels of part of the training set
        n_pool = min(config.label_only_pool, px.shape[0] - config.num_teachers)
        if n_pool < 1:
            raise ValueError("label_only_pool leaves no records for the teachers")
        pool, keep = random_split_indices(px.shape[0], [n_pool, px.shape[0] - n_pool], generator=generator)
        ux, uy, px, py = px[pool], py[pool], px[keep], py[keep]
        ids = None if ids is None else ids[keep]
    images = (ux, ex) if ux.dim() in (3, 4) else (None, None)
    feature_map: dict[str, Any] = {"kind": config.features}
    if config.dataset == "adult":
        # z-scores with statistics of the public pool only (never of the private part)
        mean, std = ux.mean(0), ux.std(0)
        px, ux, ex = (standardize(t, mean=mean, std=std) for t in (px, ux, ex))
        feature_map["standardized_on"] = "public pool"
    if config.features == "pca":
        feats = PublicFeatures.fit(ux, dim=config.pca_dim, whiten=config.whiten)  # public pool only
        px, ux, ex = feats.transform(px), feats.transform(ux), feats.transform(ex)
        feature_map.update(feats.meta)
        feature_map["state"] = feats.state_dict()
    elif config.features == "raw" and config.teacher_model != "cnn":
        px, ux, ex = px.flatten(1), ux.flatten(1), ex.flatten(1)
    # scattering / ssl: images stay as they are; prepare() maps them (pate_stab.run.features)
    return Task(px, py, ux, uy, ex, ey, num_classes, config.threat_model, feature_map, *images, private_ids=ids)

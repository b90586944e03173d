"""The run's data: private training set, public query pool and evaluation split, in the teachers' input space.

``dataset="files"`` reads the user's own files and ``"arrays"`` takes their arrays
(:mod:`pate_stab.data.own`): the classes, image size and CSV encoding come from declarations or
public data, and a table's numeric columns are standardised with the public pool's statistics.
Without an evaluation set the evaluation split is empty (its figures are None); without pool
labels ``public_y`` is None (pool figures are None).

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
    standardize,
)
from pate_stab.data.own import OwnData, load_files
from pate_stab.run.config import TransferConfig
from pate_stab.run.progress import compute_device
from pate_stab.teachers import PublicFeatures, keyed_subset, record_keys_from_tensors

__all__ = ["Task", "load_own_data", "load_task", "pool_truth"]


@dataclass
class Task:
    """Inputs are already in the teachers' feature space; labels of ``public_y`` are for reporting
    (None: the pool has no labels); the evaluation split may be empty (no evaluation set)."""

    private_x: Tensor
    private_y: Tensor
    public_x: Tensor
    public_y: Tensor | None
    eval_x: Tensor
    eval_y: Tensor
    num_classes: int
    threat_model: str
    feature_map: dict[str, Any] = field(default_factory=dict)
    # the public pool's and the evaluation split's images, kept when the inputs above are
    # features of them (the fixmatch student trains on images); None for non-image data
    public_images: Tensor | None = None
    eval_images: Tensor | None = None
    # declared class names (own data)
    class_names: tuple[str, ...] | None = None
    # one int64 id per private record, supplied with the data (a column or an array) and kept by a
    # neighbouring data set; None when the source has none. ``partition_key: record_id`` hashes
    # these; row numbers are never used (removing a record would renumber every later one)
    private_ids: Tensor | None = None
    # the private images themselves, kept when the inputs are images (before any flattening or
    # feature map): the direct CNN learner trains on them (pate_stab.run.direct); None otherwise
    private_images: Tensor | None = None
    # what a new record goes through before the student sees it, all of it public (the published
    # student carries it, pate_stab.run.student_file): ``inputs`` describes a raw record (its kind,
    # shape, a table's schema), ``preprocess`` the maps fitted on the public pool, in order
    inputs: dict[str, Any] = field(default_factory=dict)
    preprocess: list[dict[str, Any]] = field(default_factory=list)
    # the splits as loaded, before any preprocessing (z-scores, PCA): the run folder's data identity
    # (pate_stab.run.run_folder.check_data_identity). Preprocessing reduces over many records with kernels
    # chosen by the thread count and the device, so its last bits may differ between machines; the
    # data as loaded do not
    loaded: tuple[Tensor, ...] = ()
    # label privacy with queries over the private inputs (pate_stab.run.prepare.label_query_task): the
    # query pool's true labels, which are private labels. Private diagnostics only, never published
    pool_labels_private: Tensor | None = None


def pool_truth(task: Task, index: Tensor) -> Tensor | None:
    """True labels of the pool points ``index`` (reporting only), or None when the pool has none."""
    return None if task.public_y is None else task.public_y[index]


def load_own_data(config: TransferConfig) -> OwnData:
    """The user's files named by a ``dataset="files"`` configuration, checked
    (:func:`pate_stab.data.own.load_files`)."""
    if config.data.private is None or config.data.public is None:
        raise ValueError("dataset 'files' needs the private and public paths")
    return load_files(
        config.data.private,
        config.data.public,
        config.data.evaluation,
        classes=config.data.classes,
        schema=config.data.schema,
        image_shape=config.data.image_shape,
        pool_labels=config.data.pool_labels,
        encoding=config.data.encoding,
    )


def _require_dir(config: TransferConfig) -> Path:
    if config.data.data_dir is None:
        raise FileNotFoundError(f"dataset {config.data.dataset!r} needs a data directory (data_dir / --data-dir)")
    path = Path(config.data.data_dir)
    if not path.is_dir() and not config.data.download:
        raise FileNotFoundError(f"data directory {path} does not exist")
    return path


def _raw_splits(config: TransferConfig, generator: torch.Generator) -> tuple[list[Any], int]:
    """(private_x, private_y, public_x, public_y, eval_x, eval_y), num_classes; public-pool scenario."""
    if config.data.dataset == "synthetic":
        n = config.data.num_private + config.data.num_public + config.data.num_eval
        x, y = make_gaussian_mixture(
            n,
            num_classes=config.data.num_classes,
            dim=config.data.dim,
            separation=config.data.separation,
            noise_rate=config.data.label_noise,
            generator=generator,
        )
        a, b = config.data.num_private, config.data.num_private + config.data.num_public
        return [x[:a], y[:a], x[a:b], y[a:b], x[b:], y[b:]], config.data.num_classes
    path = _require_dir(config)
    if config.data.dataset == "adult":
        # the official split is by file: adult.data is private; adult.test (public) gives the pool
        # (its first half) and the evaluation split; the published schema fixes every column
        train = load_adult(path, part="train", norm=None)
        test = load_adult(path, part="test", norm=None)
        half = len(test) // 2
        return [train.x, train.y, test.x[:half], test.y[:half], test.x[half:], test.y[half:]], 2
    loader = {"mnist": load_mnist, "fashion_mnist": load_fashion_mnist, "svhn": load_svhn, "cifar10": load_cifar10}
    splits = pate_split(loader[config.data.dataset](path, download=config.data.download))
    s = splits
    return [s.private.x, s.private.y, s.public.x, s.public.y, s.evaluation.x, s.evaluation.y], splits.num_classes


def _rows(f: Any, t: Tensor) -> Tensor:
    """``f(t)``; for an empty ``t`` (no evaluation set), an empty tensor of ``f``'s output shape."""
    if t.shape[0]:
        return f(t)
    return f(torch.zeros(1, *t.shape[1:], dtype=t.dtype))[:0]


def _splits(
    config: TransferConfig, generator: torch.Generator, data: OwnData | None
) -> tuple[OwnData | None, tuple[Tensor, Tensor, Tensor, Tensor | None, Tensor, Tensor], int, Tensor | None]:
    """The user's data (arrays given in Python, or files) or a bundled set: (own data or None, the six splits
    private x/y, pool x/y, evaluation x/y, the number of classes, the private record ids or None)."""
    own: OwnData | None = None
    if config.data.dataset == "arrays":
        if data is None:
            raise ValueError(
                "dataset 'arrays' takes its data in Python (pate_stab.transfer(pate_stab.Data.arrays(...)), or data=)"
            )
        own = data
    elif data is not None:
        raise ValueError(f"data= is for dataset 'arrays', not {config.data.dataset!r}")
    elif config.data.dataset == "files":
        own = load_own_data(config)
    ids: Tensor | None = None  # the bundled data sets carry no record ids
    if own is not None:
        if config.data.threat_model != "public-pool":
            raise ValueError("own data brings its own public pool: use threat_model 'public-pool'")
        if config.release.partition_key == "record_id" and own.private_ids is None:
            # DESIGN.md fact 1: record ids come with the data, never from row numbers
            raise ValueError(
                "partition_key 'record_id' needs record ids supplied with the private data (the schema's "
                "id_column, 'ids' in the .npz / .pt, private_ids= in Python)"
            )
        ex = own.eval_x if own.eval_x is not None else own.public_x[:0]
        ey = own.eval_y if own.eval_y is not None else torch.empty(0, dtype=torch.int64)
        px, py, ux, uy, num_classes = own.private_x, own.private_y, own.public_x, own.public_y, own.num_classes
        ids = own.private_ids
    else:
        (px, py, ux, uy, ex, ey), num_classes = _raw_splits(config, generator)
    return own, (px, py, ux, uy, ex, ey), num_classes, ids


def load_task(config: TransferConfig, *, generator: torch.Generator, data: OwnData | None = None) -> Task:
    """The three splits in the teachers' input space (features fitted on public data only).

    ``data``: the user's checked arrays for ``dataset="arrays"`` (:func:`pate_stab.data.own.own_data`).

    Raises:
        FileNotFoundError: missing data directory or files.
        InputDataError: own data that does not fit (:mod:`pate_stab.data.own`).
    """
    own, (px, py, ux, uy, ex, ey), num_classes, ids = _splits(config, generator, data)
    if config.data.threat_model == "label-only":
        # BTT18 §4.2 (ii): no public pool; discard the labels of part of the training set. Each
        # record's side is a keyed hash of its id (if supplied) or content alone, so removing a
        # record moves no other record (a random permutation of the n rows would move them all)
        keys: Any = ids if ids is not None else record_keys_from_tensors(px, py)
        in_pool = keyed_subset(keys, config.data.label_only_share, generator=generator)
        if not bool(in_pool.any()) or int((~in_pool).sum()) < config.teachers.num_teachers:
            raise ValueError(
                f"label_only_share={config.data.label_only_share:g} leaves no public pool or fewer records than "
                "teachers"
            )
        pool, keep = torch.nonzero(in_pool).flatten(), torch.nonzero(~in_pool).flatten()
        ux, uy, px, py = px[pool], py[pool], px[keep], py[keep]
        ids = None if ids is None else ids[keep]
    images: tuple[Tensor | None, Tensor | None] = (ux, ex) if ux.dim() in (3, 4) else (None, None)
    private_images = px if px.dim() in (3, 4) else None
    # a pool without labels stands as an empty label tensor; ids supplied with the data are part of it
    loaded: tuple[Tensor, ...] = (px, py, ux, uy if uy is not None else torch.empty(0, dtype=torch.int64), ex, ey)
    loaded += (ids,) if ids is not None else ()
    feature_map: dict[str, Any] = {"kind": config.feature_stage.features}
    kind = own.kind if own is not None else ("arrays" if ux.dim() == 2 else "images")
    inputs: dict[str, Any] = {"kind": kind, "shape": list(ux.shape[1:])}
    if own is not None and own.schema is not None:
        inputs["schema"] = own.schema.to_dict()
    preprocess: list[dict[str, Any]] = []
    if config.data.dataset == "adult" or (own is not None and own.kind == "table"):
        # z-scores with statistics of the public pool only (never of the private part)
        mean, std = ux.mean(0), ux.std(0)
        px, ux, ex = (_rows(lambda t: standardize(t, mean=mean, std=std), t) for t in (px, ux, ex))
        feature_map["standardized_on"] = "public pool"
        preprocess.append({"op": "standardize", "mean": mean, "std": std, "fitted_on": "public pool"})
    if config.feature_stage.features == "pca":
        # images: on the run's GPU where it has one (each split moves there once, its features come back
        # once; the content keys then read the images as loaded, pate_stab.run.prepare.partition_keys);
        # other inputs on the CPU, where the content keys read the features
        device = compute_device(config.execution.accelerator) if px.dim() in (3, 4) else "cpu"
        px, ux, ex = (t.to(device) for t in (px, ux, ex))
        # public pool only; under label privacy every input is public: the private and public inputs
        fit_on = torch.cat([px, ux]) if config.release.privacy_unit == "label" else ux
        feats = PublicFeatures.fit(fit_on, dim=config.feature_stage.pca_dim, whiten=config.feature_stage.whiten)
        px, ux, ex = (_rows(lambda t: feats.transform(t).cpu(), t) for t in (px, ux, ex))
        if config.release.privacy_unit == "label":
            feats.meta["fitted_on"] = "private and public inputs (no labels; label privacy)"
        feature_map.update(feats.meta)
        feature_map["state"] = feats.state_dict()
        preprocess.append({"op": "pca", "state": feats.state_dict()})
    elif config.feature_stage.features == "raw" and config.teachers.teacher_model not in (
        "cnn",
        "fixmatch",
    ):  # CNN teachers keep images
        px, ux, ex = px.flatten(1), ux.flatten(1), ex.flatten(1)
        preprocess.append({"op": "flatten"})
    # scattering / ssl / scattering+ssl: images stay as they are; prepare() maps them (pate_stab.run.features)
    class_names = own.class_names if own is not None else None
    return Task(
        px, py, ux, uy, ex, ey, num_classes, config.data.threat_model, feature_map, *images,
        class_names=class_names, private_ids=ids, private_images=private_images, inputs=inputs,
        preprocess=preprocess, loaded=loaded,
    )  # fmt: skip

"""The run's feature stage for ``features: scattering | ssl``: fitted on the public pool, cached in the run folder.

:func:`extract_features` builds the extractor with :func:`pate_stab.features.make_features`, fits
it on the public pool's images only (no labels; scattering itself uses no data, its projection
the public coefficients; the SSL encoder trains on the public images) and maps the private,
public and evaluation inputs, row by row. The result is saved as
``<run>/features/<name>_<key>.pt``; the key hashes the extractor's options, the input tensors and
(SSL) the generator's state, so a rerun of the same run reuses the file and a file made from
other inputs is never used. ``raw`` and ``pca`` stay in :func:`pate_stab.run.data.load_task`.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pate_stab.features import make_features
from pate_stab.features.ssl import SSLConfig
from pate_stab.run.config import TransferConfig
from pate_stab.run.data import Task

__all__ = ["EXTRACTED_FEATURES", "extract_features", "extractor_options", "features_key"]

EXTRACTED_FEATURES = ("scattering", "ssl")
SSL_EMBED_DIM = SSLConfig().embed_dim


def extractor_options(config: TransferConfig) -> dict[str, Any]:
    """The :func:`make_features` options of the run's extractor (JSON-ready; ``ssl`` gets its
    config object and generator from :func:`extract_features`)."""
    if config.features == "scattering":
        j, whiten = config.scattering_j, config.whiten
        return {"J": j, "L": 8, "standardize": True, "pca_dim": config.pca_dim, "whiten": whiten}
    if config.features == "ssl":
        ssl_pca: int | None = config.pca_dim if config.pca_dim < SSL_EMBED_DIM else None
        ssl = SSLConfig(epochs=config.ssl_epochs).to_dict()
        return {"config": ssl, "standardize": True, "pca_dim": ssl_pca, "whiten": config.whiten}
    raise ValueError(f"features {config.features!r} are not extracted by this stage ({', '.join(EXTRACTED_FEATURES)})")


def _tensor_digest(h: Any, t: Tensor) -> None:
    t = t.detach().contiguous().cpu()
    h.update(str((tuple(t.shape), str(t.dtype))).encode())
    h.update(t.numpy().tobytes())


def features_key(name: str, options: dict[str, Any], inputs: list[Tensor], generator: torch.Generator | None) -> str:
    """Cache key: the extractor's name and options, every input tensor, and the generator's state."""
    h = hashlib.sha1(json.dumps({"name": name, "options": options}, sort_keys=True).encode())
    for t in inputs:
        _tensor_digest(h, t)
    if generator is not None:
        h.update(generator.get_state().numpy().tobytes())
    return h.hexdigest()[:16]


def extract_features(
    task: Task, config: TransferConfig, cache_dir: Path, *, generator: torch.Generator
) -> tuple[Task, bool]:
    """Replace the task's inputs by their features (fitted on ``task.public_x`` only).

    Args:
        task: the splits, inputs as images (n, C, H, W) or (n, H, W).
        config: ``features`` and the extractor's settings.
        cache_dir: folder of the cached features (``<run>/features``).
        generator: the SSL encoder's randomness (unused by scattering).

    Returns:
        The task with (n, d) float32 features and ``feature_map`` describing them, and whether the
        features were read from the cache.

    Raises:
        ValueError: the inputs are not images.
    """
    name = config.features
    inputs = [task.private_x, task.public_x, task.eval_x]
    if any(t.dim() not in (3, 4) for t in inputs):
        raise ValueError(f"features={name!r} needs images (n, C, H, W); this task's inputs have shape "
                         f"{tuple(task.public_x.shape)}")  # fmt: skip
    options = extractor_options(config)
    uses_generator = name == "ssl"
    key = features_key(name, options, inputs, generator if uses_generator else None)
    path = cache_dir / f"{name}_{key}.pt"
    cached = path.is_file()
    if cached:
        saved = torch.load(path, weights_only=False)
        if saved.get("key") != key:
            raise ValueError(f"{path} holds features with another key; remove it")
    else:
        kwargs = dict(options)
        if uses_generator:
            kwargs["config"] = SSLConfig(**options["config"])
            kwargs["generator"] = generator
        extractor = make_features(name, **kwargs)
        t0 = time.perf_counter()
        extractor.fit(task.public_x)  # public pool only, no labels
        fit_s = time.perf_counter() - t0
        saved = {
            "key": key,
            "options": options,
            "private": extractor.transform(task.private_x),
            "public": extractor.transform(task.public_x),
            "evaluation": extractor.transform(task.eval_x),
            "meta": extractor.meta,
            "state": extractor.state_dict(),
            "fit_s": fit_s,
            "total_s": time.perf_counter() - t0,
        }
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(saved, tmp)
        tmp.replace(path)
    feature_map: dict[str, Any] = {
        "kind": name,
        **saved["meta"],
        "input_shape": list(task.public_x.shape[1:]),
        "cache": f"features/{path.name}",
    }
    out = Task(
        saved["private"], task.private_y, saved["public"], task.public_y, saved["evaluation"], task.eval_y,
        task.num_classes, task.threat_model, feature_map, task.public_images, task.eval_images, task.private_ids,
    )  # fmt: skip
    return out, cached

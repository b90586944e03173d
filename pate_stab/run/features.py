"""The run's feature stage for ``features: scattering | ssl``: fitted on the public pool, cached in the run folder.

:func:`extract_features` builds the extractor with :func:`pate_stab.features.make_features`, fits
it on the public pool's images only (no labels; scattering itself uses no data, its projection
the public coefficients; the SSL encoder trains on the public images) and maps the private,
public and evaluation inputs, row by row. The result is saved as
``<run>/features/<name>_<key>.pt`` (mode 0600: it holds the private records' features).

The key names the file, and the file name is published (``report.json``'s ``features.cache``),
so it is computed from public inputs and options only: the extractor's name and options, the
public pool and evaluation inputs, and (SSL) the generator's state. The private records enter
only as HMAC-SHA256 under the run folder's secret key
(:func:`~pate_stab.privacy.private_files.run_private_key`), stored inside the private cache
file; a cached file whose MAC does not match this run's private inputs is recomputed, so a
file made from other inputs is never used. ``raw`` and ``pca`` stay in
:func:`pate_stab.run.data.load_task`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pate_stab.features import make_features
from pate_stab.features.ssl import SSLConfig
from pate_stab.privacy.private_files import keyed_digest, run_private_key, tensor_bytes
from pate_stab.run.config import TransferConfig
from pate_stab.run.data import Task

__all__ = ["EXTRACTED_FEATURES", "extract_features", "extractor_options", "features_key", "private_inputs_mac"]

EXTRACTED_FEATURES = ("scattering", "ssl")
SSL_EMBED_DIM = SSLConfig().embed_dim


def extractor_options(config: TransferConfig) -> dict[str, Any]:
    """The :func:`make_features` options of the run's extractor (JSON-ready; ``ssl`` gets its
    config object and generator from :func:`extract_features`)."""
    if config.features == "scattering":
        j, whiten = config.scattering_j, config.whiten
        return {"J": j, "L": 8, "standardize": True, "pca_dim": config.pca_dim, "whiten": whiten}
    if config.features == "ssl":
        # a variance share always applies; a component count only when it reduces the embedding
        ssl_pca = config.pca_dim if isinstance(config.pca_dim, float) or config.pca_dim < SSL_EMBED_DIM else None
        ssl = SSLConfig(epochs=config.ssl_epochs).to_dict()
        return {"config": ssl, "standardize": True, "pca_dim": ssl_pca, "whiten": config.whiten}
    raise ValueError(f"features {config.features!r} are not extracted by this stage ({', '.join(EXTRACTED_FEATURES)})")


def _tensor_digest(h: Any, t: Tensor) -> None:
    t = t.detach().contiguous().cpu()
    h.update(str((tuple(t.shape), str(t.dtype))).encode())
    h.update(t.numpy().tobytes())


def features_key(name: str, options: dict[str, Any], inputs: list[Tensor], generator: torch.Generator | None) -> str:
    """Cache key: the extractor's name and options, the given input tensors, and the generator's state.

    Pass public inputs only (the key names a published file); private inputs are checked with
    :func:`private_inputs_mac`.
    """
    h = hashlib.sha1(json.dumps({"name": name, "options": options}, sort_keys=True).encode())
    for t in inputs:
        _tensor_digest(h, t)
    if generator is not None:
        h.update(generator.get_state().numpy().tobytes())
    return h.hexdigest()[:16]


def _transform_rows(extractor: Any, x: Tensor) -> Tensor:
    """``extractor.transform(x)``; for an empty ``x``, an empty tensor of the features' shape."""
    if x.shape[0]:
        return extractor.transform(x)
    return extractor.transform(torch.zeros(1, *x.shape[1:], dtype=x.dtype))[:0]


def private_inputs_mac(key: bytes, private_x: Tensor) -> str:
    """HMAC-SHA256 of the private inputs under the run's secret key (kept in the private cache file)."""
    return keyed_digest(key, tensor_bytes(private_x))


def _save_private(obj: Any, path: Path) -> None:
    """torch.save to ``path`` atomically, the file readable by its owner only (mode 0600)."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as f:
        torch.save(obj, f)
    tmp.replace(path)


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
    if any(t.dim() not in (3, 4) for t in (task.private_x, task.public_x, task.eval_x)):
        raise ValueError(f"features={name!r} needs images (n, C, H, W); this task's inputs have shape "
                         f"{tuple(task.public_x.shape)}")  # fmt: skip
    options = extractor_options(config)
    uses_generator = name == "ssl"
    # public inputs only: the key is the cache file's (published) name
    key = features_key(name, options, [task.public_x, task.eval_x], generator if uses_generator else None)
    private_mac = private_inputs_mac(run_private_key(cache_dir.parent), task.private_x)
    path = cache_dir / f"{name}_{key}.pt"
    saved = torch.load(path, weights_only=False) if path.is_file() else None
    if saved is not None and saved.get("key") != key:
        raise ValueError(f"{path} holds features with another key; remove it")
    cached = saved is not None and saved.get("private_mac") == private_mac
    if saved is None or not cached:  # no cache, or one made from other private inputs: recompute
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
            "private_mac": private_mac,
            "options": options,
            "private": extractor.transform(task.private_x),
            "public": extractor.transform(task.public_x),
            "evaluation": _transform_rows(extractor, task.eval_x),  # may be empty (no evaluation set)
            "meta": extractor.meta,
            "state": extractor.state_dict(),
            "fit_s": fit_s,
            "total_s": time.perf_counter() - t0,
        }
        cache_dir.mkdir(parents=True, exist_ok=True)
        _save_private(saved, path)
    feature_map: dict[str, Any] = {
        "kind": name,
        **saved["meta"],
        "input_shape": list(task.public_x.shape[1:]),
        "cache": f"features/{path.name}",
    }
    out = replace(
        task, private_x=saved["private"], public_x=saved["public"], eval_x=saved["evaluation"], feature_map=feature_map
    )
    return out, cached

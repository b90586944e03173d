"""The run's feature stage for ``features: scattering | ssl | scattering+ssl``: fitted on the public
pool, cached in the run folder.

:func:`extract_features` builds the extractor with :func:`pate_stab.features.make_features`, fits
it on the public pool's images only (no labels; scattering itself uses no data, its projection
the public coefficients; the SSL encoder trains on the public images) and maps the private,
public and evaluation inputs, row by row. The result is saved as
``<run>/features/<name>_<key>.pt`` (mode 0600: it holds the private records' features).

The key names the file, and the file name is published (``report.json``'s ``features.cache``; of
a combination, ``features.blocks[i].cache``), so it is computed from public inputs and options
only: the extractor's name and options, the public pool and evaluation inputs, and (SSL) the
generator's state. The private records enter only as HMAC-SHA256 under the run folder's secret
key (:func:`~pate_stab.privacy.ledger.private_files.run_private_key`), stored inside the private cache
file; a cached file whose MAC does not match this run's private inputs is recomputed, so a file
made from other inputs is never used. ``raw`` and ``pca`` stay in
:func:`pate_stab.run.data.load_task`.

``scattering+ssl`` joins the two maps by a label-free rule fixed in advance. Each block is
extracted exactly as its single feature map (same options, own cache file, so a single-feature
cache made in the same run folder is reused and vice versa): standardised and reduced by its
own public PCA (``pca_dim``, ``whiten``). Each block is then divided by the square root of its
total variance on the public pool (the sum of its columns' variances, divisor n − 1 as the
projection's standardisation), so each block's public total variance is 1, and the blocks are
concatenated (scattering first) for the private, public and evaluation rows alike. Without the
scaling the block with more dimensions would dominate every distance and dot product by its
dimension count alone (each standardised coefficient brings variance 1: 3,969 scattering
coefficients against 128 SSL embedding dimensions on 28 × 28 images, before their PCAs); with it
each map weighs the same whatever its width. The scale is computed from public rows only, so it
is a public value (reported per block).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pate_stab.features import make_features
from pate_stab.features.ssl import SSLConfig
from pate_stab.privacy.ledger.private_files import (
    keyed_digest,
    private_folder,
    run_private_key,
    tensor_bytes,
    write_private,
)
from pate_stab.run.config import TransferConfig
from pate_stab.run.config.names import EXTRACTED_FEATURES, FEATURE_BLOCKS
from pate_stab.run.data import Task
from pate_stab.run.progress import compute_device

__all__ = [
    "EXTRACTED_FEATURES",
    "FEATURE_BLOCKS",
    "block_scale",
    "extract_features",
    "extractor_options",
    "features_key",
    "private_inputs_mac",
]

SSL_EMBED_DIM = SSLConfig().embed_dim
COMBINATION_RULE = (
    "each block (standardised and reduced by its own public PCA) divided by the square root of its total "
    "variance on the public pool, then the blocks concatenated in this order"
)


def extractor_options(config: TransferConfig, name: str | None = None) -> dict[str, Any]:
    """The :func:`make_features` options of one extractor (JSON-ready; ``ssl`` gets its config
    object and generator from :func:`extract_features`).

    ``name``: the block (``scattering`` or ``ssl``); None: the run's ``features``, which must then
    be a single extractor (a combination's blocks are asked for one by one).
    """
    name = config.feature_stage.features if name is None else name
    if name == "scattering":
        j, whiten = config.feature_stage.scattering_j, config.feature_stage.whiten
        return {"J": j, "L": 8, "standardize": True, "pca_dim": config.feature_stage.pca_dim, "whiten": whiten}
    if name == "ssl":
        # a variance share always applies; a component count only when it reduces the embedding
        ssl_pca = (
            config.feature_stage.pca_dim
            if isinstance(config.feature_stage.pca_dim, float) or config.feature_stage.pca_dim < SSL_EMBED_DIM
            else None
        )
        ssl = SSLConfig(epochs=config.feature_stage.ssl_epochs).to_dict()
        return {"config": ssl, "standardize": True, "pca_dim": ssl_pca, "whiten": config.feature_stage.whiten}
    singles = ", ".join(f for f in EXTRACTED_FEATURES if FEATURE_BLOCKS[f] == (f,))
    raise ValueError(f"features {name!r} are not one extractor of this stage ({singles})")


def block_scale(public: Tensor, name: str) -> float:
    """The square root of a block's total variance on the public pool: the sum over its columns
    of the public rows' variance (divisor n − 1). Dividing the block by it sets that total to 1.

    Raises:
        ValueError: fewer than two public rows, or a block constant on the public pool.
    """
    if public.shape[0] < 2:
        raise ValueError(f"scaling the {name} block needs at least 2 public rows, got {public.shape[0]}")
    total = float(public.to(torch.float64).var(0, unbiased=True).sum())
    if not math.isfinite(total) or total <= 0.0:
        raise ValueError(f"the {name} block has total public variance {total!r}; it cannot be scaled to 1")
    return math.sqrt(total)


def scattering_device(config: TransferConfig) -> str:
    """Where the scattering transform and its public projection run: a GPU when the run's
    accelerator resolves to CUDA, the CPU otherwise (:func:`~pate_stab.run.progress.compute_device`)."""
    return compute_device(config.execution.accelerator)


def ssl_device(config: TransferConfig) -> str:
    """Where the SSL encoder trains and encodes and its public projection is fitted and applied:
    the run's GPU when its accelerator resolves to CUDA, the CPU otherwise."""
    return compute_device(config.execution.accelerator)


def features_device(config: TransferConfig) -> str:
    """The feature stage's device, for its stage line."""
    return compute_device(config.execution.accelerator)


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
    """torch.save to ``path`` through :func:`~pate_stab.privacy.ledger.private_files.write_private`
    (atomic, readable by its owner only)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    write_private(path, buffer.getvalue())


def _extract_block(
    task: Task, name: str, config: TransferConfig, cache_dir: Path, generator: torch.Generator, private_mac: str
) -> tuple[dict[str, Any], Path, bool]:
    """One extractor's features of the task's three sets, from its cache file or computed (and cached).

    Returns the saved record (``private``, ``public``, ``evaluation``, ``meta``, ...), the cache
    file and whether it was read from the cache.
    """
    options = extractor_options(config, name)
    uses_generator = name == "ssl"
    # the SSL encoder trained on a GPU draws its pixel noise there (pate_stab.features.ssl): other
    # features than the CPU's from the same generator, so its device is part of the key (a CPU key
    # is unchanged); scattering's coefficients are the same map wherever it runs
    device = ssl_device(config) if uses_generator else "cpu"
    key_options = options if device == "cpu" else {**options, "device": device}
    # public inputs only: the key is the cache file's (published) name
    key = features_key(name, key_options, [task.public_x, task.eval_x], generator if uses_generator else None)
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
        # the device is not an option of the cache key: the features are those of the same map
        if name == "scattering":
            kwargs["device"] = scattering_device(config)
        elif name == "ssl":
            kwargs["device"] = ssl_device(config)
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
        private_folder(cache_dir)  # the private records' features: a private folder (0700)
        _save_private(saved, path)
    return saved, path, cached


def _block_step(name: str, saved: dict[str, Any], scale: float | None) -> dict[str, Any]:
    """One extractor as a step of the published student's preprocessing: its name, options and
    fitted state (public: fitted on the public pool only) and, in a combination, its public scale."""
    return {"name": name, "options": saved["options"], "state": saved["state"], "scale": scale}


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
        features were read from the cache (a combination: every block).

    Raises:
        ValueError: the inputs are not images, or ``features`` is not extracted by this stage.
    """
    name = config.feature_stage.features
    if name not in FEATURE_BLOCKS:
        raise ValueError(f"features {name!r} are not extracted by this stage ({', '.join(EXTRACTED_FEATURES)})")
    if any(t.dim() not in (3, 4) for t in (task.private_x, task.public_x, task.eval_x)):
        raise ValueError(f"features={name!r} needs images (n, C, H, W); this task's inputs have shape "
                         f"{tuple(task.public_x.shape)}")  # fmt: skip
    private_mac = private_inputs_mac(run_private_key(cache_dir.parent), task.private_x)
    blocks = [(block, *_extract_block(task, block, config, cache_dir, generator, private_mac))
              for block in FEATURE_BLOCKS[name]]  # fmt: skip
    input_shape = list(task.public_x.shape[1:])
    if len(blocks) == 1:
        _, saved, path, cached = blocks[0]
        feature_map: dict[str, Any] = {
            "kind": name,
            **saved["meta"],
            "input_shape": input_shape,
            "cache": f"features/{path.name}",
        }
        step = {"op": "extract", "blocks": [_block_step(name, saved, None)]}
        out = replace(task, private_x=saved["private"], public_x=saved["public"], eval_x=saved["evaluation"],
                      feature_map=feature_map, preprocess=[*task.preprocess, step])  # fmt: skip
        return out, cached
    parts: dict[str, list[Tensor]] = {"private": [], "public": [], "evaluation": []}
    described, start, steps = [], 0, []
    for block, saved, path, _ in blocks:
        scale = block_scale(saved["public"], block)  # public rows only: a public value
        steps.append(_block_step(block, saved, scale))
        for split, rows in parts.items():
            rows.append(saved[split] / scale)
        dim = int(saved["public"].shape[1])
        described.append({**saved["meta"], "dim": dim, "columns": [start, start + dim],
                          "public_total_variance": scale**2, "cache": f"features/{path.name}"})  # fmt: skip
        start += dim
    feature_map = {
        "kind": name, "name": name, "dim": start, "combination": COMBINATION_RULE, "blocks": described,
        "fitted_on": f"public pool ({task.public_x.shape[0]} images, no labels)", "input_shape": input_shape,
    }  # fmt: skip
    joined = {split: torch.cat(rows, dim=1) for split, rows in parts.items()}
    step = {"op": "extract", "blocks": steps}
    out = replace(task, private_x=joined["private"], public_x=joined["public"], eval_x=joined["evaluation"],
                  feature_map=feature_map, preprocess=[*task.preprocess, step])  # fmt: skip
    return out, all(cached for *_, cached in blocks)

"""A votes file: the teachers' votes written by any program, read and checked; and writing one.

Layouts (``layout``):

``"predictions"``
    a k × n matrix of teacher class predictions (PATE's layout: row j = teacher j's labels on
    the n queries), integers in [0, C); C is ``num_classes``, which must be declared.
``"counts"``
    an n × C matrix of vote counts (non-negative integers, every row summing to the same k);
    C is the file's column count (``num_classes``, if given, must equal it).
``"scores"``
    k × n binary scores in [0, 1], or k × n × 2 class scores (the class-1 column is used),
    for the soft-label releaser (``stability-soft``); C = 2.

The number of classes is declared, never read from the votes (DESIGN.md facts 6 and 11). Taking
C as the largest predicted label + 1 would let one teacher's vote for a class no other teacher
votes for widen the output range of the noisy argmax: GNMax over C + 1 classes releases the extra
class with positive probability on one neighbouring data set and never on the other, so no
(ε, δ) claim holds; with seeded noise the whole noise stream (m × C draws) would shift too. So a
``predictions`` file needs ``num_classes`` and a label outside [0, C) is refused. A ``counts``
file's width is a shape its writer chose (the program that counted the votes allots one column
per class of its task), not a vote: it is taken as the declared C, and a writer must fix it from
the task's class count, never from the largest label voted. ``scores`` are binary by layout.

Files: ``.npy``, ``.pt`` (a tensor) or ``.csv`` (comma-separated numbers, one matrix row per line;
``predictions`` and ``counts`` only). Bad input — wrong rank or shape, labels outside [0, C),
NaN, negative or non-integer counts, rows with different totals, an empty file — raises
:class:`VotesError` naming the problem. The public points' inputs that go with the votes
(:func:`load_public_inputs`) are read from the same formats.

The votes are a function of the private data: :func:`export_votes` writes a file only its owner
can read. Releasing them is :func:`pate_stab.run.release_votes.release_votes`.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pate_stab.aggregation.votes import vote_histogram
from pate_stab.privacy.ledger.private_files import write_private
from pate_stab.vocabulary import LAYOUTS, Layout

__all__ = ["LAYOUTS", "Layout", "VotesError", "export_votes", "load_public_inputs", "load_votes"]


class VotesError(ValueError):
    """The votes file cannot be released as given; nothing was spent."""


def load_public_inputs(path: str | os.PathLike[str], num_queries: int) -> torch.Tensor:
    """The public points' inputs or features, one row per query: float32 (n, d) (rows flattened).

    Raises:
        VotesError: missing, unreadable, non-finite, or a row count other than the votes' n.
    """
    array = _read(Path(path))
    if not np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_:
        raise VotesError(f"public inputs {path} must be numbers, got dtype {array.dtype}")
    if array.ndim < 2:
        array = array.reshape(-1, 1)
    x = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).flatten(1)
    if not torch.isfinite(x).all():
        raise VotesError(f"public inputs {path} contain NaN or infinite values")
    if x.shape[0] != num_queries:
        raise VotesError(f"public inputs {path} have {x.shape[0]} rows but the votes hold {num_queries} queries")
    return x


def _read(path: Path) -> np.ndarray:
    if not path.is_file():
        raise VotesError(f"votes file {path} not found")
    if path.stat().st_size == 0:
        raise VotesError(f"votes file {path} is empty")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            array = np.load(path, allow_pickle=False)
        elif suffix == ".pt":
            obj = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(obj, torch.Tensor):
                raise VotesError(f"{path} must hold one tensor, got {type(obj).__name__}")
            array = obj.numpy()
        elif suffix == ".csv":
            with path.open(newline="") as f:
                rows = [row for row in csv.reader(f) if row and any(cell.strip() for cell in row)]
            if not rows:
                raise VotesError(f"votes file {path} has no rows")
            if len({len(r) for r in rows}) != 1:
                raise VotesError(f"{path}: rows have different lengths ({sorted({len(r) for r in rows})})")
            array = np.array([[float(c) for c in r] for r in rows], dtype=np.float64)
        else:
            raise VotesError(f"{path}: unknown file type {suffix!r}; use .npy, .pt or .csv")
    except (ValueError, OSError, RuntimeError) as exc:
        if isinstance(exc, VotesError):
            raise
        raise VotesError(f"{path}: cannot read votes ({exc})") from exc
    if array.size == 0:
        raise VotesError(f"votes file {path} holds an empty array of shape {array.shape}")
    return np.asarray(array)


def _integers(array: np.ndarray, what: str) -> np.ndarray:
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.number):
        raise VotesError(f"{what} must be numbers, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise VotesError(f"{what} contain NaN or infinite values")
        if not (array == np.round(array)).all():
            raise VotesError(f"{what} must be integers; found non-integer values")
    return array.astype(np.int64)


def load_votes(
    path: str | os.PathLike[str], *, layout: Layout = "predictions", num_classes: int | None = None
) -> tuple[torch.Tensor, int]:
    """The votes of a file as the aggregators take them, and the number of queries n.

    Args:
        path: the votes file.
        layout: ``predictions``, ``counts`` or ``scores`` (module docstring).
        num_classes: the declared number of classes C: required for ``predictions`` (never read
            from the votes); for ``counts``, if given, it must equal the file's column count; for
            ``scores``, if given, it must be 2.

    Returns:
        ``(votes, n)``: an (n, C) int64 histogram for ``predictions`` / ``counts``, or (k, n)
        float64 binary scores for ``scores``.

    Raises:
        VotesError: the file is missing, empty, unreadable or invalid, or C is not declared for
            ``predictions`` (the message names why).
    """
    if layout not in LAYOUTS:
        raise VotesError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if num_classes is not None:
        if isinstance(num_classes, bool) or not isinstance(num_classes, int | np.integer) or num_classes < 2:
            raise VotesError(f"num_classes must be an integer of at least 2, got {num_classes!r}")
        num_classes = int(num_classes)
    if layout == "scores" and num_classes not in (None, 2):
        raise VotesError(f"scores are binary (C = 2) for the soft-label releaser, got num_classes={num_classes}")
    array = _read(Path(path))
    if layout == "scores":
        if array.ndim == 3:
            if array.shape[2] != 2:
                raise VotesError(
                    f"scores of shape {array.shape}: the soft-label releaser is binary, so k × n × C scores "
                    "need C = 2 (release each class's k × n scores with its own run otherwise)"
                )
            array = array[:, :, 1]
        if array.ndim != 2:
            raise VotesError(f"scores must be k × n (or k × n × 2), got shape {array.shape}")
        if not np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_:
            raise VotesError(f"scores must be numbers, got dtype {array.dtype}")
        scores = array.astype(np.float64)
        if not np.isfinite(scores).all():
            raise VotesError("scores contain NaN or infinite values")
        if (scores < 0).any() or (scores > 1).any():
            raise VotesError(f"scores must lie in [0, 1]; found values in [{scores.min():g}, {scores.max():g}]")
        return torch.from_numpy(scores), scores.shape[1]
    if array.ndim != 2:
        what = "a k × n matrix of teacher predictions" if layout == "predictions" else "an n × C matrix of counts"
        raise VotesError(f"{layout} must be {what}, got an array of rank {array.ndim} (shape {array.shape})")
    if layout == "counts":
        counts = _integers(array, "counts")
        if (counts < 0).any():
            raise VotesError("counts must be non-negative")
        if counts.shape[1] < 2:
            raise VotesError(f"counts need at least 2 classes (columns), got shape {counts.shape}")
        totals = counts.sum(axis=1)
        if (totals != totals[0]).any():
            bad = int(np.nonzero(totals != totals[0])[0][0])
            raise VotesError(
                f"every row of counts must sum to the same number of teachers k; row 0 sums to {totals[0]}, "
                f"row {bad} to {totals[bad]}"
            )
        if num_classes is not None and num_classes != counts.shape[1]:
            raise VotesError(f"counts have {counts.shape[1]} columns but num_classes={num_classes}")
        return torch.from_numpy(counts), counts.shape[0]
    if num_classes is None:
        raise VotesError(
            "declare the number of classes C (num_classes= / --num-classes) for teacher predictions: it is never "
            "read from the votes (one teacher's vote for a class nobody else votes for would change the release's "
            "output range). Nothing was spent"
        )
    predictions = _integers(array, "teacher predictions")
    c = num_classes
    if (predictions < 0).any() or (predictions >= c).any():
        raise VotesError(
            f"teacher predictions must be class labels in [0, {c}) ({c} declared classes); found values in "
            f"[{predictions.min()}, {predictions.max()}]"
        )
    return vote_histogram(torch.from_numpy(predictions), c), predictions.shape[1]


def export_votes(teachers: Any, x: torch.Tensor, path: str | os.PathLike[str]) -> Path:
    """Write the teachers' predictions on ``x`` as a k × n .npy matrix readable only by its owner.

    The votes are a function of the private data and are NOT differentially private: keep the
    file as private as the data (it is created with mode 0600).
    """
    predictions = teachers.predict_votes(x).cpu().numpy().astype(np.int64)  # (k, n)
    target = Path(path)
    if target.suffix != ".npy":
        target = target.with_suffix(".npy")
    buffer = io.BytesIO()
    np.save(buffer, predictions)
    return write_private(target, buffer.getvalue())  # atomic, mode 0600

"""What every tabular loader returns, and the maps of each row it applies before returning.

:class:`TabularData` (features, labels, feature names); :func:`project_to_unit_ball`, a map of
each row on its own; :func:`standardize` with statistics the caller supplies (fit them on public
data). The loaders' opt-out of z-scores over the whole loaded file warns with
:class:`~pate_stab._checks.PrivacyLeakWarning` (see :mod:`pate_stab.data.tabular`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from pate_stab._checks import check_tensor, warn_privacy_leak
from pate_stab.data.table_encoding import EncodedTable
from pate_stab.data.table_schema import TabularSchema

__all__ = ["LabelFormat", "Norm", "TabularData", "project_to_unit_ball", "standardize"]

Norm = Literal["l2", "l1"] | None
LabelFormat = Literal["01", "pm1"]


@dataclass(frozen=True)
class TabularData:
    """Features (n, d) float32, labels (n,), and the name of every feature column."""

    x: Tensor
    y: Tensor
    feature_names: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.x.shape[0])


def standardize(x: Tensor, *, mean: Tensor, std: Tensor) -> Tensor:
    """z-scores with given statistics (fit them on public data for a private pipeline).

    Columns with ``std == 0`` are only centred.
    """
    x = check_tensor("x", x, ndim=2, floating=True)
    mean = check_tensor("mean", mean, ndim=1, floating=True)
    std = check_tensor("std", std, ndim=1, floating=True)
    if mean.shape[0] != x.shape[1] or std.shape[0] != x.shape[1] or bool((std < 0).any()):
        raise ValueError("mean and std must have one non-negative entry per column of x")
    return (x - mean) / torch.where(std > 0, std, torch.ones_like(std))


def project_to_unit_ball(x: Tensor, *, norm: Literal["l2", "l1"] = "l2") -> Tensor:
    """Each row x ↦ x / max(1, ‖x‖): rows already inside the unit ball are unchanged.

    Uses no statistic of the data set (each row is scaled on its own), so it is free under DP.
    """
    x = check_tensor("x", x, ndim=2, floating=True)
    if norm not in ("l2", "l1"):
        raise ValueError(f"norm must be 'l2' or 'l1', got {norm!r}")
    p = 2 if norm == "l2" else 1
    return x / x.norm(p=p, dim=1, keepdim=True).clamp_min(1.0)


def standardize_in_file(x: np.ndarray, columns: Sequence[int], what: str) -> np.ndarray:
    """The opt-out: z-scores of ``columns`` with statistics of every loaded row (PrivacyLeakWarning)."""
    warn_privacy_leak(
        f"{what}(standardize=True): means and standard deviations read from every row of the file, private "
        "ones included; this is not covered by any privacy guarantee. Use standardize=False and "
        "standardise with statistics of public data.",
        stacklevel=4,
    )
    x = x.copy()
    cols = list(columns)
    if cols:
        mean, std = x[:, cols].mean(axis=0), x[:, cols].std(axis=0)
        x[:, cols] = (x[:, cols] - mean) / np.where(std > 0, std, 1.0)
    return x


def to_tabular_data(
    x: np.ndarray,
    names: list[str],
    labels: np.ndarray,
    *,
    norm: Norm,
    label_format: LabelFormat | Literal["real"],
) -> TabularData:
    """Features as float32 (projected into the unit ball when ``norm`` is given), labels in ``label_format``."""
    xt = torch.from_numpy(np.asarray(x, dtype=np.float64)).to(torch.float32)
    if norm is not None:
        xt = project_to_unit_ball(xt, norm=norm)
    if label_format == "real":
        y = torch.from_numpy(labels.astype(np.float64)).to(torch.float32)
    elif label_format == "01":
        y = torch.from_numpy(labels.astype(np.int64))
    elif label_format == "pm1":
        y = torch.from_numpy(labels.astype(np.float32) * 2 - 1)
    else:
        raise ValueError(f"label_format must be '01' or 'pm1', got {label_format!r}")
    return TabularData(x=xt, y=y, feature_names=names)


def require_file(path: Path, what: str) -> Path:
    """``path`` if it is a file; else FileNotFoundError naming the data set (``what``) and the file."""
    if not path.is_file():
        raise FileNotFoundError(f"{what}: expected the file {path}")
    return path


def from_encoded_table(
    table: EncodedTable,
    schema: TabularSchema,
    *,
    standardize: bool,
    norm: Norm,
    label_format: LabelFormat,
    what: str,
) -> TabularData:
    """A schema-encoded table as :class:`TabularData` (``standardize``: the opt-out on its numeric columns)."""
    if table.y is None:
        raise ValueError(f"{what}: the file has no label column {schema.label!r}")
    x = table.x.double().numpy()
    if standardize:
        numeric, j = [], 0
        for col in schema.columns:
            if col.kind == "numeric":
                numeric.append(j)
            j += col.width
        x = standardize_in_file(x, numeric, what)
    return to_tabular_data(x, table.feature_names, table.y.numpy(), norm=norm, label_format=label_format)

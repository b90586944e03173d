"""Scaling features with public, fixed bounds (DESIGN.md fact 6: bounds are never read from the data).

:func:`scale_to_bounds` maps column c from [lower_c, upper_c] to [0, 1]. The bounds are
arguments: a record outside them is clipped (``out_of_bounds="clip"``, the default) or rejected
with a ``ValueError`` (``"raise"``); it never widens the bounds, so one record cannot change how
any other record is scaled. Clipping is a fixed map applied to each record on its own, so it
needs no privacy budget.

The per-data-set bounds below are stated before looking at any record; values outside are
clipped. :func:`bounds_from_data` is the opt-out (min–max ranges of the data, as Chaudhuri &
Vinterbo 2013, Sec. 5 do): it reads a statistic of the private records and raises a
``PrivacyLeakWarning``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch
from torch import Tensor

from pate_stab._checks import check_real, check_tensor, warn_privacy_leak

__all__ = [
    "ADULT_NUMERIC_BOUNDS",
    "MAGIC_BOUNDS",
    "scale_to_bounds",
    "bounds_from_data",
]

# UCI Adult, the six numeric columns in the order of pate_stab.data.tabular.load_adult. From the
# extraction rule in adult.names (age > 16, hours-per-week > 0), the 16 education levels
# (education-num 1–16), the census top-codes (age 90, capital gains 99,999, 99 hours a week), and
# round upper limits for fnlwgt (1.5 million) and capital losses (5,000).
ADULT_NUMERIC_BOUNDS: dict[str, tuple[float, float]] = {
    "age": (17.0, 90.0),
    "fnlwgt": (0.0, 1.5e6),
    "education-num": (1.0, 16.0),
    "capital-gain": (0.0, 99_999.0),
    "capital-loss": (0.0, 5_000.0),
    "hours-per-week": (1.0, 99.0),
}

# MAGIC gamma telescope, the ten columns of pate_stab.data.tabular.load_magic (units from
# magic04.names): lengths and distances in mm on the camera plane, fSize = log10 of a photon
# count, fConc / fConc1 ratios in [0, 1], fAlpha an angle in [0°, 90°]. The mm ranges are round
# limits assumed for the camera plane, not fitted to the records.
MAGIC_BOUNDS: dict[str, tuple[float, float]] = {
    "fLength": (0.0, 400.0),
    "fWidth": (0.0, 300.0),
    "fSize": (0.0, 6.0),
    "fConc": (0.0, 1.0),
    "fConc1": (0.0, 1.0),
    "fAsym": (-600.0, 600.0),
    "fM3Long": (-400.0, 400.0),
    "fM3Trans": (-250.0, 250.0),
    "fAlpha": (0.0, 90.0),
    "fDist": (0.0, 500.0),
}


def _bound_tensors(bounds: Mapping[str, tuple[float, float]] | Sequence[tuple[float, float]]) -> tuple[Tensor, Tensor]:
    pairs = list(bounds.values()) if isinstance(bounds, Mapping) else list(bounds)
    lower, upper = [], []
    for j, pair in enumerate(pairs):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError(f"bounds[{j}] must be a (lower, upper) pair, got {pair!r}")
        lo = check_real(f"lower bound of column {j}", pair[0])
        hi = check_real(f"upper bound of column {j}", pair[1])
        if not (hi > lo):
            raise ValueError(f"column {j}: upper bound {hi} must exceed lower bound {lo}")
        lower.append(lo)
        upper.append(hi)
    return torch.tensor(lower, dtype=torch.float64), torch.tensor(upper, dtype=torch.float64)


def scale_to_bounds(
    x: Tensor,
    *,
    bounds: Mapping[str, tuple[float, float]] | Sequence[tuple[float, float]],
    out_of_bounds: Literal["clip", "raise"] = "clip",
) -> Tensor:
    """Each column c of ``x`` mapped from [lower_c, upper_c] to [0, 1], with bounds given as an argument.

    Args:
        x: (n, d) features; NaN and ±inf are rejected.
        bounds: d pairs (lower, upper), as a sequence or a mapping in column order (e.g.
            :data:`ADULT_NUMERIC_BOUNDS`). Public, fixed values: never derived from ``x``.
        out_of_bounds: ``"clip"`` clamps values outside [lower, upper] to the nearest bound;
            ``"raise"`` rejects them.

    Returns:
        (n, d) float64 tensor with entries in [0, 1].

    Raises:
        TypeError: a bound is not a pair of real numbers.
        ValueError: not one pair per column, upper ≤ lower, NaN/inf in ``x`` or the bounds, an
            unknown ``out_of_bounds``, or a value outside its bounds with ``"raise"``.
    """
    x = check_tensor("x", x, ndim=2, floating=True).to(torch.float64)
    lower, upper = _bound_tensors(bounds)
    if lower.shape[0] != x.shape[1]:
        raise ValueError(
            f"bounds must have one (lower, upper) pair per column of x ({x.shape[1]}), got {lower.shape[0]}"
        )
    if out_of_bounds not in ("clip", "raise"):
        raise ValueError(f"out_of_bounds must be 'clip' or 'raise', got {out_of_bounds!r}")
    outside = (x < lower) | (x > upper)  # (n, d)
    if out_of_bounds == "raise" and bool(outside.any()):
        columns = outside.any(dim=0).nonzero().flatten().tolist()
        names = list(bounds) if isinstance(bounds, Mapping) else columns
        raise ValueError(
            f"{int(outside.any(dim=1).sum())} records lie outside the given bounds (columns "
            f"{[names[c] for c in columns]}); widen the public bounds or pass out_of_bounds='clip'"
        )
    return (torch.minimum(torch.maximum(x, lower), upper) - lower) / (upper - lower)


def bounds_from_data(x: Tensor) -> list[tuple[float, float]]:
    """Min–max range of each column of ``x``: bounds read from the data, which leaks (opt-out only).

    Emits ``PrivacyLeakWarning``: a record at the edge of its column moves the bounds, and so the
    scaling of every other record, which no privacy guarantee of this package covers. Columns
    whose values are all equal get the range (value, value + 1).
    """
    x = check_tensor("x", x, ndim=2, floating=True).to(torch.float64)
    warn_privacy_leak(
        "bounds_from_data: feature ranges read from the (private) data; this leaks information "
        "about the records and is not covered by the privacy guarantee. Pass public bounds."
    )
    lo, hi = x.min(dim=0).values, x.max(dim=0).values
    return [(float(a), float(b) if b > a else float(a) + 1.0) for a, b in zip(lo, hi, strict=True)]

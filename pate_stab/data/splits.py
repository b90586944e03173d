"""Seeded random splits for data sets without a fixed protocol (tabular, synthetic).

For MNIST / SVHN use :func:`pate_stab.data.pate_split` (PATE's fixed, index-based split).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from pate_stab._checks import check_generator, check_int

__all__ = ["random_split_indices"]


def random_split_indices(num_records: int, sizes: Sequence[int], *, generator: torch.Generator) -> list[Tensor]:
    """Split ``range(num_records)`` into disjoint random parts of the given sizes.

    Args:
        num_records: n ≥ 0.
        sizes: non-negative part sizes summing to at most n (the rest is left out).
        generator: one random permutation is drawn from it.

    Returns:
        One int64 index tensor per part, each sorted ascending.
    """
    num_records = check_int("num_records", num_records, minimum=0)
    check_generator(generator)
    sizes = [check_int("sizes[i]", s, minimum=0) for s in sizes]
    if sum(sizes) > num_records:
        raise ValueError(f"sizes sum to {sum(sizes)} > num_records={num_records}")
    perm = torch.randperm(num_records, generator=generator)
    out, start = [], 0
    for s in sizes:
        out.append(perm[start : start + s].sort().values)
        start += s
    return out

"""Data sets and splits: synthetic tasks, image sets (PATE's split), tabular sets from a path.

Example (the embedded default needs no files)::

    from pate_stab.data import make_gaussian_mixture
    from pate_stab.rng import seeded_generator
    x, y = make_gaussian_mixture(1000, num_classes=3, dim=10, noise_rate=0.1,
                                 generator=seeded_generator(0))

The names below are imported on first use (PEP 562): a module of the package, such as the
table schema, loads without torch, so that the command line checks a user's files before
anything heavy is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pate_stab._lazy import lazy_exports

if TYPE_CHECKING:
    from pate_stab.data.bounds import ADULT_NUMERIC_BOUNDS, MAGIC_BOUNDS, bounds_from_data, scale_to_bounds
    from pate_stab.data.images import (
        ImageData,
        PateSplits,
        Split,
        load_cifar10,
        load_fashion_mnist,
        load_mnist,
        load_svhn,
        pate_split,
        read_idx,
    )
    from pate_stab.data.schema import EncodedTable, TabularSchema, encode_table
    from pate_stab.data.synthetic import (
        apply_label_noise,
        gaussian_mixture_means,
        make_gaussian_mixture,
        make_halfspace,
        make_interval,
        make_threshold,
        to_signed_labels,
    )
    from pate_stab.data.tabular import (
        TabularData,
        load_adult,
        load_kddcup99,
        load_magic,
        load_warfarin,
        load_warfarin_iwpc,
        project_to_unit_ball,
        standardize,
    )

_LAZY = {
    "ADULT_NUMERIC_BOUNDS": "pate_stab.data.bounds",
    "MAGIC_BOUNDS": "pate_stab.data.bounds",
    "bounds_from_data": "pate_stab.data.bounds",
    "scale_to_bounds": "pate_stab.data.bounds",
    "ImageData": "pate_stab.data.images",
    "PateSplits": "pate_stab.data.images",
    "Split": "pate_stab.data.images",
    "load_cifar10": "pate_stab.data.images",
    "load_fashion_mnist": "pate_stab.data.images",
    "load_mnist": "pate_stab.data.images",
    "load_svhn": "pate_stab.data.images",
    "pate_split": "pate_stab.data.images",
    "read_idx": "pate_stab.data.images",
    "EncodedTable": "pate_stab.data.schema",
    "TabularSchema": "pate_stab.data.schema",
    "encode_table": "pate_stab.data.schema",
    "apply_label_noise": "pate_stab.data.synthetic",
    "gaussian_mixture_means": "pate_stab.data.synthetic",
    "make_gaussian_mixture": "pate_stab.data.synthetic",
    "make_halfspace": "pate_stab.data.synthetic",
    "make_interval": "pate_stab.data.synthetic",
    "make_threshold": "pate_stab.data.synthetic",
    "to_signed_labels": "pate_stab.data.synthetic",
    "TabularData": "pate_stab.data.tabular",
    "load_adult": "pate_stab.data.tabular",
    "load_kddcup99": "pate_stab.data.tabular",
    "load_magic": "pate_stab.data.tabular",
    "load_warfarin": "pate_stab.data.tabular",
    "load_warfarin_iwpc": "pate_stab.data.tabular",
    "project_to_unit_ball": "pate_stab.data.tabular",
    "standardize": "pate_stab.data.tabular",
}

__all__ = [
    "ADULT_NUMERIC_BOUNDS",
    "MAGIC_BOUNDS",
    "EncodedTable",
    "ImageData",
    "PateSplits",
    "Split",
    "TabularData",
    "TabularSchema",
    "apply_label_noise",
    "bounds_from_data",
    "encode_table",
    "gaussian_mixture_means",
    "load_adult",
    "load_cifar10",
    "load_fashion_mnist",
    "load_kddcup99",
    "load_magic",
    "load_mnist",
    "load_svhn",
    "load_warfarin",
    "load_warfarin_iwpc",
    "make_gaussian_mixture",
    "make_halfspace",
    "make_interval",
    "make_threshold",
    "pate_split",
    "project_to_unit_ball",
    "read_idx",
    "scale_to_bounds",
    "standardize",
    "to_signed_labels",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)

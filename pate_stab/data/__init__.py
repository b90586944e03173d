"""Data sets and splits: synthetic tasks, image sets (PATE's split), tabular sets from a path.

Example (the embedded default needs no files)::

    from pate_stab.data import make_gaussian_mixture
    from pate_stab.rng import seeded_generator
    x, y = make_gaussian_mixture(1000, num_classes=3, dim=10, noise_rate=0.1,
                                 generator=seeded_generator(0))
"""

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
from pate_stab.data.splits import random_split_indices
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
    "random_split_indices",
    "read_idx",
    "scale_to_bounds",
    "standardize",
    "to_signed_labels",
]

"""Image datasets (MNIST, Fashion-MNIST, SVHN, CIFAR-10) and PATE's public–private split.

MNIST and Fashion-MNIST are read straight from the four original idx files
(``train-images-idx3-ubyte[.gz]``, ``train-labels-idx1-ubyte[.gz]``,
``t10k-images-idx3-ubyte[.gz]``, ``t10k-labels-idx1-ubyte[.gz]``), looked up in ``data_dir``
itself (a flat folder, such as the offline copies in ``../shared/data/mnist``) and then in
torchvision's layout
``data_dir/MNIST/raw`` (``data_dir/FashionMNIST/raw``). With ``download=True`` torchvision
fetches them into its layout first. SVHN and CIFAR-10 go through torchvision (their files are
``.mat`` / pickled batches).

Images come back as float32 in [0, 1], shape (n, channels, height, width); labels as int64.
SVHN's label "10" for the digit zero is mapped to 0 by torchvision.

PATE's protocol (Papernot et al. 2017, Section 4; kept by Bassily, Thakkar & Thakurta 2018):
the training set is the private data; of the test set, the first 9,000 images are the public
query pool (unlabelled for the learner; their labels are used only for reporting) and the last
1,000 are the evaluation set. :func:`pate_split` does exactly that, by index, with no
randomness, so every run uses the same split.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pate_stab._checks import check_int

__all__ = [
    "Split",
    "PateSplits",
    "ImageData",
    "read_idx",
    "load_mnist",
    "load_fashion_mnist",
    "load_svhn",
    "load_cifar10",
    "pate_split",
]

_IDX_DTYPES: dict[int, Any] = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


@dataclass(frozen=True)
class Split:
    """Features ``x`` (n, …) and labels ``y`` (n,) of one part of a data set."""

    x: Tensor
    y: Tensor

    def __len__(self) -> int:
        return int(self.x.shape[0])


@dataclass(frozen=True)
class ImageData:
    """The original train and test sets of an image data set."""

    train: Split
    test: Split
    num_classes: int


@dataclass(frozen=True)
class PateSplits:
    """Private training data, the public query pool and the evaluation set."""

    private: Split
    public: Split
    evaluation: Split
    num_classes: int


def read_idx(path: str | Path) -> np.ndarray:
    """Read one idx file (optionally gzip-compressed) into a NumPy array.

    The idx format (LeCun et al.): two zero bytes, a dtype byte, a rank byte, the dimensions as
    big-endian uint32, then the data in row-major order.

    Raises:
        ValueError: the file is not a well-formed idx file.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an idx file (bad magic number)")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(
            f"{path} is truncated or corrupt: header says shape {shape} ({expected} bytes), "
            f"found {len(raw) - header} bytes"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _find_idx(data_dir: Path, torchvision_name: str) -> dict[str, Path]:
    """Locate the four idx files in ``data_dir`` or ``data_dir/<name>/raw`` (gz or not)."""
    candidates = [data_dir, data_dir / torchvision_name / "raw"]
    found: dict[str, Path] = {}
    for stem in _IDX_FILES:
        for folder in candidates:
            # the original distribution names some files "…idx3-ubyte", others "…idx3.ubyte"
            names = (
                stem,
                stem + ".gz",
                stem.replace("-idx", ".idx"),
                stem.replace("-idx", ".idx") + ".gz",
            )
            hit = next((folder / n for n in names if (folder / n).is_file()), None)
            if hit is not None:
                found[stem] = hit
                break
    missing = [s for s in _IDX_FILES if s not in found]
    if missing:
        raise FileNotFoundError(
            f"{torchvision_name} files not found in {data_dir} (nor in "
            f"{data_dir / torchvision_name / 'raw'}). Expected the original idx files "
            f"{', '.join(s + '.gz' for s in _IDX_FILES)} (gzip-compressed or not); missing: "
            f"{', '.join(missing)}. Pass download=True to fetch them with torchvision when online."
        )
    return found


def _load_idx_dataset(data_dir: str | Path, torchvision_name: str, download: bool) -> ImageData:
    data_dir = Path(data_dir)
    if download:
        import torchvision

        getattr(torchvision.datasets, torchvision_name)(root=str(data_dir), train=True, download=True)
        getattr(torchvision.datasets, torchvision_name)(root=str(data_dir), train=False, download=True)
    files = _find_idx(data_dir, torchvision_name)

    def part(prefix: str) -> Split:
        images = read_idx(files[f"{prefix}-images-idx3-ubyte"])
        labels = read_idx(files[f"{prefix}-labels-idx1-ubyte"])
        if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
            raise ValueError(
                f"{torchvision_name} {prefix} files disagree: images {images.shape}, labels {labels.shape}"
            )
        x = torch.from_numpy(images.copy()).to(torch.float32).div_(255.0).unsqueeze(1)
        return Split(x=x, y=torch.from_numpy(labels.astype(np.int64)))

    return ImageData(train=part("train"), test=part("t10k"), num_classes=10)


def load_mnist(data_dir: str | Path, *, download: bool = False) -> ImageData:
    """MNIST: 60,000 training and 10,000 test images, (n, 1, 28, 28) float32 in [0, 1].

    Args:
        data_dir: folder holding the four idx files (flat, or torchvision's ``MNIST/raw``).
        download: fetch with torchvision into ``data_dir/MNIST/raw`` first (needs internet).

    Raises:
        FileNotFoundError: the files are absent; the message names the folder and the files.
    """
    return _load_idx_dataset(data_dir, "MNIST", download)


def load_fashion_mnist(data_dir: str | Path, *, download: bool = False) -> ImageData:
    """Fashion-MNIST (Xiao et al. 2017): same layout and format as :func:`load_mnist`."""
    return _load_idx_dataset(data_dir, "FashionMNIST", download)


def _torchvision_images(data: np.ndarray, channels_last: bool) -> Tensor:
    x = torch.from_numpy(np.ascontiguousarray(data))
    if channels_last:
        x = x.permute(0, 3, 1, 2)
    return x.contiguous().to(torch.float32).div_(255.0)


def load_svhn(data_dir: str | Path, *, download: bool = False) -> ImageData:
    """SVHN (cropped digits; train 73,257 and test 26,032 images, (n, 3, 32, 32)) via torchvision.

    Expects ``train_32x32.mat`` and ``test_32x32.mat`` in ``data_dir`` (torchvision's layout).
    PATE also used the 531,131 "extra" images as private data; load them with torchvision's
    ``SVHN(split="extra")`` if wanted.

    Raises:
        FileNotFoundError: the files are absent and ``download`` is False.
    """
    import torchvision

    data_dir = Path(data_dir)
    parts = {}
    for split in ("train", "test"):
        try:
            ds = torchvision.datasets.SVHN(root=str(data_dir), split=split, download=download)
        except RuntimeError as exc:
            raise FileNotFoundError(
                f"SVHN {split} split not found in {data_dir}: expected {split}_32x32.mat there. "
                "Pass download=True to fetch it with torchvision when online."
            ) from exc
        parts[split] = Split(
            x=_torchvision_images(ds.data, channels_last=False),
            y=torch.as_tensor(ds.labels, dtype=torch.int64),
        )
    return ImageData(train=parts["train"], test=parts["test"], num_classes=10)


def load_cifar10(data_dir: str | Path, *, download: bool = False) -> ImageData:
    """CIFAR-10 (50,000 / 10,000 images, (n, 3, 32, 32)) via torchvision.

    Expects torchvision's ``cifar-10-batches-py`` folder inside ``data_dir``.

    Raises:
        FileNotFoundError: the files are absent and ``download`` is False.
    """
    import torchvision

    data_dir = Path(data_dir)
    parts = {}
    for train in (True, False):
        try:
            ds = torchvision.datasets.CIFAR10(root=str(data_dir), train=train, download=download)
        except RuntimeError as exc:
            raise FileNotFoundError(
                f"CIFAR-10 not found in {data_dir}: expected the folder "
                f"{data_dir / 'cifar-10-batches-py'} (data_batch_1..5, test_batch). "
                "Pass download=True to fetch it with torchvision when online."
            ) from exc
        parts[train] = Split(
            x=_torchvision_images(ds.data, channels_last=True),
            y=torch.as_tensor(ds.targets, dtype=torch.int64),
        )
    return ImageData(train=parts[True], test=parts[False], num_classes=10)


def pate_split(data: ImageData, *, num_public: int = 9000) -> PateSplits:
    """PATE's split: train set private, test[:num_public] public pool, the rest evaluation.

    With the default ``num_public=9000`` on MNIST / SVHN this is PATE's protocol: the first
    9,000 test images are the public query pool, the last 1,000 (MNIST) the evaluation set.
    The split is by index and has no randomness.
    """
    num_public = check_int("num_public", num_public, minimum=1, maximum=len(data.test) - 1)
    test = data.test
    return PateSplits(
        private=data.train,
        public=Split(test.x[:num_public], test.y[:num_public]),
        evaluation=Split(test.x[num_public:], test.y[num_public:]),
        num_classes=data.num_classes,
    )

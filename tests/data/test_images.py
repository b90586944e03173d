import gzip
import shutil

import numpy as np
import pytest
import torch

from pate_stab.data import load_cifar10, load_mnist, load_svhn, pate_split, read_idx


def test_read_offline_mnist_and_pate_split(shared_data):
    data = load_mnist(shared_data / "mnist")
    assert data.train.x.shape == (60_000, 1, 28, 28) and data.test.x.shape == (10_000, 1, 28, 28)
    assert data.train.x.dtype == torch.float32
    assert 0.0 <= data.train.x.min() and data.train.x.max() == 1.0
    # first training labels of the original MNIST distribution
    assert data.train.y[:8].tolist() == [5, 0, 4, 1, 9, 2, 1, 3]
    assert torch.bincount(data.test.y).tolist() == [
        980,
        1135,
        1032,
        1010,
        982,
        892,
        958,
        1028,
        974,
        1009,
    ]
    splits = pate_split(data)
    assert len(splits.private) == 60_000
    assert len(splits.public) == 9_000 and len(splits.evaluation) == 1_000
    assert torch.equal(splits.public.x, data.test.x[:9000])
    assert torch.equal(splits.evaluation.y, data.test.y[9000:])


def test_torchvision_layout_and_uncompressed(tmp_path, shared_data):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte", "t10k-images-idx3-ubyte"):
        with gzip.open(shared_data / "mnist" / f"{name}.gz") as src, open(raw / name, "wb") as dst:
            shutil.copyfileobj(src, dst)
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_mnist(tmp_path)
    # a tiny fake training-image file completes the set; the loader then checks consistency
    header = bytes([0, 0, 8, 3]) + (2).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2
    (raw / "train-images-idx3-ubyte").write_bytes(header + bytes(2 * 28 * 28))
    with pytest.raises(ValueError, match="disagree"):
        load_mnist(tmp_path)


def test_missing_mnist_message_names_dir_and_files(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_mnist(tmp_path / "nowhere")
    msg = str(info.value)
    assert str(tmp_path / "nowhere") in msg
    assert "train-images-idx3-ubyte.gz" in msg and "t10k-labels-idx1-ubyte.gz" in msg
    assert "download=True" in msg


def test_missing_svhn_and_cifar(tmp_path):
    with pytest.raises(FileNotFoundError, match="train_32x32.mat"):
        load_svhn(tmp_path)
    with pytest.raises(FileNotFoundError, match="cifar-10-batches-py"):
        load_cifar10(tmp_path)


def test_read_idx_roundtrip_and_corrupt(tmp_path):
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    header = bytes([0, 0, 8, 3]) + b"".join(d.to_bytes(4, "big") for d in arr.shape)
    (tmp_path / "a").write_bytes(header + arr.tobytes())
    assert np.array_equal(read_idx(tmp_path / "a"), arr)
    (tmp_path / "b").write_bytes(header + arr.tobytes()[:-1])
    with pytest.raises(ValueError, match="truncated"):
        read_idx(tmp_path / "b")
    (tmp_path / "c").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="magic"):
        read_idx(tmp_path / "c")

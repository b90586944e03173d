"""Own files are never read by a guess: a public pool file with labels is refused unless they are
declared (reporting only); images of mixed channel counts are refused naming the file unless an
image_shape asks for conversion; classes read from the evaluation folder are said to come from there."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pate_stab.data.own import InputDataError, load_files
from tests.run.test_own_data_run import CSV_SCHEMA, mixture, write_table

PIL = pytest.importorskip("PIL.Image")


def test_public_csv_with_the_label_column_is_refused_unless_declared(tmp_path):
    (px, py), (ux, uy), _ = mixture(seed=5)
    write_table(tmp_path / "private.csv", px, py)
    write_table(tmp_path / "pool.csv", ux, uy)  # still has the label column
    (tmp_path / "schema.json").write_text(json.dumps(CSV_SCHEMA))
    with pytest.raises(InputDataError, match=r"public pool .*pool\.csv holds the label column 'label'.*--pool-labels"):
        load_files(tmp_path / "private.csv", tmp_path / "pool.csv", schema=tmp_path / "schema.json")
    data = load_files(tmp_path / "private.csv", tmp_path / "pool.csv", schema=tmp_path / "schema.json",
                      pool_labels=True)  # fmt: skip
    assert data.public_y is not None and data.public_y.shape == (ux.shape[0],)


def test_public_npz_with_labels_is_refused_unless_declared(tmp_path):
    (px, py), (ux, uy), _ = mixture(seed=6)
    np.savez(tmp_path / "p.npz", x=px.numpy(), y=py.numpy())
    np.savez(tmp_path / "u.npz", x=ux.numpy(), y=uy.numpy())
    with pytest.raises(InputDataError, match=r"u\.npz holds labels under key 'y'"):
        load_files(tmp_path / "p.npz", tmp_path / "u.npz", classes=3)
    assert load_files(tmp_path / "p.npz", tmp_path / "u.npz", classes=3, pool_labels=True).public_y is not None


def _images(folder, n, mode, seed):
    folder.mkdir(parents=True, exist_ok=True)
    g = np.random.default_rng(seed)
    for i in range(n):
        shape = (8, 8) if mode == "L" else (8, 8, 3)
        PIL.fromarray(g.integers(0, 255, size=shape).astype(np.uint8), mode=mode).save(folder / f"{mode}{i:03d}.png")


def test_images_of_mixed_channel_counts_are_refused_naming_the_file(tmp_path):
    for c in ("a", "b"):
        _images(tmp_path / "train" / c, 4, "L", seed=len(c))
        _images(tmp_path / "test" / c, 2, "L", seed=3)
    _images(tmp_path / "pool", 5, "L", seed=4)
    _images(tmp_path / "pool", 1, "RGB", seed=5)  # one colour image among grey ones
    with pytest.raises(InputDataError, match=r"pool/RGB000\.png: an image of 3 channel\(s\) \(mode RGB\) among images "
                       r"of 1 .*image_shape"):  # fmt: skip
        load_files(tmp_path / "train", tmp_path / "pool", tmp_path / "test")
    data = load_files(tmp_path / "train", tmp_path / "pool", tmp_path / "test", image_shape=(1, 8, 8))  # asked
    assert data.public_x.shape == (6, 1, 8, 8)


def test_classes_read_from_the_evaluation_folder_are_said_to_come_from_there(tmp_path):
    for c in ("a", "b", "c"):
        _images(tmp_path / "train" / c, 3, "L", seed=1)
    for c in ("a", "b"):
        _images(tmp_path / "test" / c, 2, "L", seed=2)
    _images(tmp_path / "pool", 3, "L", seed=3)
    with pytest.raises(InputDataError, match=r"sub-folder 'c' is not one of the classes read from the evaluation "
                       r"folder .*test \['a', 'b'\] \(no classes were declared\)"):  # fmt: skip
        load_files(tmp_path / "train", tmp_path / "pool", tmp_path / "test")

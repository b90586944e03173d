"""One private record removed: every other record's encoding, the width and the split sizes stay.

DESIGN.md fact 6. Each loader reads a copy of the shared file without one record; the copies live
in pytest's temporary folder, never in the repository.
"""

from __future__ import annotations

import gzip
import shutil
import warnings

import pytest
import torch

from pate_stab._checks import PrivacyLeakWarning
from pate_stab.data.tabular import KDD_TEXT_COLUMNS, load_kddcup99, load_magic, load_warfarin
from pate_stab.run import TransferConfig
from pate_stab.run.data import load_task


def _without_line(src, dst, line):
    """Copy ``src`` to ``dst`` leaving out 0-based ``line``."""
    lines = src.read_text(encoding="utf-8-sig").splitlines(keepends=True)
    dst.write_text("".join(lines[:line] + lines[line + 1 :]), encoding="utf-8")
    return dst


def _adult_task(data_dir):
    config = TransferConfig(dataset="adult", data_dir=str(data_dir), num_teachers=10)
    return load_task(config, generator=torch.Generator().manual_seed(0))


def test_adult_run_splits_do_not_move_when_one_private_record_is_removed(shared_data, tmp_path):
    src = shared_data / "adult"
    full = _adult_task(src)
    lines = (src / "adult.data").read_text().splitlines()
    holand = next(i for i, r in enumerate(lines) if "Holand-Netherlands" in r)  # the only one, private
    for line in (holand, 0, 20_000):
        folder = tmp_path / str(line)
        folder.mkdir()
        shutil.copy(src / "adult.test", folder / "adult.test")
        _without_line(src / "adult.data", folder / "adult.data", line)
        part = _adult_task(folder)
        for name in ("private_x", "public_x", "eval_x"):
            assert getattr(part, name).shape[1] == getattr(full, name).shape[1] == 113, name
        assert part.private_x.shape[0] == full.private_x.shape[0] - 1
        assert (part.public_x.shape[0], part.eval_x.shape[0]) == (full.public_x.shape[0], full.eval_x.shape[0])
        assert torch.equal(part.public_x, full.public_x) and torch.equal(part.eval_x, full.eval_x)
        assert torch.equal(part.public_y, full.public_y) and torch.equal(part.eval_y, full.eval_y)
        keep = torch.arange(full.private_x.shape[0]) != line
        assert torch.equal(part.private_x, full.private_x[keep])


def test_magic_rows_keep_their_encoding(shared_data, tmp_path):
    src = shared_data / "magic" / "magic04.data"
    full = load_magic(src.parent)
    line = int(full.x[:, 0].argmax())  # the longest shower: an extreme record
    part = load_magic(_without_line(src, tmp_path / "magic04.data", line).parent)
    keep = torch.arange(full.x.shape[0]) != line
    assert part.x.shape[1] == full.x.shape[1] and part.feature_names == full.feature_names
    assert torch.equal(part.x, full.x[keep])


def test_warfarin_rows_keep_their_encoding(shared_data, tmp_path):
    src = shared_data / "warfarin" / "warfarin.csv"
    header = src.read_text(encoding="utf-8-sig").splitlines()[0].split(",")
    weight = header.index("Weight (kg)")
    rows = src.read_text(encoding="utf-8-sig").splitlines()[1:]

    def kg(r):
        try:
            return float(r.split(",")[weight])
        except (ValueError, IndexError):
            return -1.0

    line = 1 + max(range(len(rows)), key=lambda i: kg(rows[i]))  # the heaviest patient
    full = load_warfarin(src.parent)
    part = load_warfarin(_without_line(src, tmp_path / "warfarin.csv", line).parent)
    assert part.feature_names == full.feature_names and part.x.shape == (full.x.shape[0] - 1, full.x.shape[1])
    # rows are kept in file order; find the dropped one among the full encoding's rows
    dropped = [i for i in range(full.x.shape[0]) if i >= part.x.shape[0] or not torch.equal(full.x[i], part.x[i])][0]
    keep = torch.arange(full.x.shape[0]) != dropped
    assert torch.equal(part.x, full.x[keep]) and torch.equal(part.y, full.y[keep])


@pytest.fixture
def kdd_sample(shared_data, tmp_path):
    """The first 3,000 records of KDD-99 plus one with a service no other record has."""
    with gzip.open(shared_data / "kddcup99" / "kddcup.data_10_percent.gz", "rt") as fh:
        lines = [next(fh) for _ in range(3000)]
    services = {r.split(",")[2] for r in lines}
    rare = next(r for r in lines if r.split(",")[2] == "http").replace(",http,", ",tftp_u,")
    assert "tftp_u" not in services
    folder = tmp_path / "kdd"
    folder.mkdir()
    with gzip.open(folder / "kddcup.data_10_percent.gz", "wt") as fh:
        fh.writelines([*lines[:1500], rare, *lines[1500:]])
    smaller = tmp_path / "kdd_without"
    smaller.mkdir()
    with gzip.open(smaller / "kddcup.data_10_percent.gz", "wt") as fh:
        fh.writelines(lines)
    public = {c: sorted({r.split(",")[j] for r in lines}) for j, c in zip((1, 2, 3), KDD_TEXT_COLUMNS, strict=True)}
    return folder, smaller, public


def test_kdd_one_hot_columns_come_from_the_public_lists(kdd_sample):
    folder, smaller, public = kdd_sample
    full = load_kddcup99(folder, text_columns="onehot", categories=public)
    part = load_kddcup99(smaller, text_columns="onehot", categories=public)
    keep = torch.arange(full.x.shape[0]) != 1500
    assert full.feature_names == part.feature_names and torch.equal(part.x, full.x[keep])
    assert full.x[1500, full.feature_names.index("service=<other>")] > 0  # the unlisted service
    with pytest.raises(ValueError, match="public category lists"):
        load_kddcup99(folder, text_columns="onehot")
    with pytest.warns(PrivacyLeakWarning, match="vocabularies are read"):
        leaky = load_kddcup99(folder, text_columns="onehot", categories="from_data")
    assert leaky.x.shape[1] == part.x.shape[1] + 1  # the opt-out shows the leak: one record, one column


def test_standardize_is_an_opt_out_with_a_warning(shared_data):
    with pytest.warns(PrivacyLeakWarning, match="standardize=True"):
        load_magic(shared_data / "magic", standardize=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        load_magic(shared_data / "magic")

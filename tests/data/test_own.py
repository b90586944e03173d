"""pate_stab.data.own: the user's arrays and files, checked, with errors that name the set, file, column or index."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.data.own import EmptyClassWarning, InputDataError, load_files, own_data
from pate_stab.data.schema import SchemaError, TabularSchema, encode_table

PIL = pytest.importorskip("PIL.Image")


def arrays(n=30, d=4, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    y = torch.arange(n) % c
    return x, y


def test_arrays_round_trip_numpy_and_torch():
    x, y = arrays()
    data = own_data((x.numpy(), y.numpy()), x[:10].numpy(), (x[:5], y[:5]), classes=["a", "b", "c"])
    assert data.num_classes == 3 and data.class_names == ("a", "b", "c")
    assert data.private_x.dtype == torch.float32 and data.private_y.dtype == torch.int64
    assert data.public_y is None and torch.equal(data.eval_y, y[:5])


def test_a_declared_class_without_a_private_example_is_kept_with_a_warning():
    """Audit 4, D4: refusing it made a run's existence depend on one private label."""
    x, y = arrays(c=3)
    with pytest.warns(EmptyClassWarning, match=r"class 2 \('2'\) has no private example.*never for publication"):
        data = own_data((x, y % 2), x, classes=3)
    assert data.num_classes == 3 and data.class_names == ("0", "1", "2")


def test_classes_come_from_the_declaration_or_the_evaluation_labels_never_the_private_ones():
    x, y = arrays(c=3)
    # private labels reach 2; the evaluation set's only reach 1: without a declaration C is 2
    with pytest.raises(InputDataError, match=r"private set labels must lie in \[0, 2\).*record 2 has label 2"):
        own_data((x, y), x, (x[:2], torch.tensor([0, 1])))
    with pytest.raises(InputDataError, match="declare the classes"):
        own_data((x, y), x)
    assert own_data((x, y), x, classes=3).num_classes == 3


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda x, y: dict(private=(x, y[:-1]), public=x), "private set: x has 30 records but y has 29 labels"),
        (lambda x, y: dict(private=(x, y.float()), public=x), "private set labels must be integers"),
        (lambda x, y: dict(private=(x, y + 1), public=x), r"must lie in \[0, 3\).*record 2 has label 3"),
        (lambda x, y: dict(private=(x.index_fill(0, torch.tensor([7]), float("nan")), y), public=x),
         "private set inputs: record 7 holds NaN or inf"),
        (lambda x, y: dict(private=(x, y), public=x.index_fill(0, torch.tensor([4]), float("inf"))),
         "public pool inputs: record 4 holds NaN or inf"),
        (lambda x, y: dict(private=(x, y), public=x[:0]), "public pool is empty"),
        (lambda x, y: dict(private=(x, y), public=(x, y)), "public pool must be its inputs alone.*public_y"),
        (lambda x, y: dict(private=(x, y), public=x[:, :3]), r"public pool records have shape \(3,\)"),
        (lambda x, y: dict(private=(x, y), public=x, evaluation=(x, y[:3])), "evaluation set: x has 30"),
        (lambda x, y: dict(private=(x, y), public=x, private_ids=torch.arange(30) % 29),
         r"record ids must be distinct: records 0 and 29 \(0-based indices\) share id 0"),
    ],
)  # fmt: skip
def test_bad_arrays_are_refused_with_a_message_naming_the_problem(make, message):
    x, y = arrays()
    with pytest.raises(InputDataError, match=message):
        own_data(**make(x, y), classes=3)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 29), st.sampled_from([-1, 3, 7]))
def test_any_label_out_of_range_is_named_by_its_index(i, bad):
    x, y = arrays()
    y = y.clone()
    y[i] = bad
    with pytest.raises(InputDataError, match=rf"record {i} has label {bad}"):
        own_data((x, y), x, classes=3)


def test_npz_pt_and_npy_files(tmp_path):
    x, y = arrays()
    np.savez(tmp_path / "priv.npz", x=x.numpy(), y=y.numpy(), ids=np.arange(100, 130))
    torch.save({"x": x[:10]}, tmp_path / "pool.pt")
    np.save(tmp_path / "ev_x.npy", x[:6].numpy())
    np.save(tmp_path / "ev_y.npy", y[:6].numpy())
    data = load_files(tmp_path / "priv.npz", tmp_path / "pool.pt", tmp_path / "ev_x.npy", classes=3)
    assert torch.equal(data.private_ids, torch.arange(100, 130)) and data.public_x.shape == (10, 4)
    assert torch.equal(data.eval_y, y[:6])
    np.savez(tmp_path / "nolabels.npz", x=x.numpy())
    with pytest.raises(InputDataError, match=r"private set .*nolabels.npz holds no labels"):
        load_files(tmp_path / "nolabels.npz", tmp_path / "pool.pt", classes=3)
    np.savez(tmp_path / "pool_y_only.npz", y=y.numpy())
    with pytest.raises(InputDataError, match=r"pool_y_only.npz holds no inputs under key 'x' \(labels in the wrong"):
        load_files(tmp_path / "priv.npz", tmp_path / "pool_y_only.npz", classes=3)
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        load_files(tmp_path / "missing.npz", tmp_path / "pool.pt", classes=3)


SCHEMA = {
    "columns": [
        {"name": "x1", "kind": "numeric", "bounds": [-5, 5]},
        {"name": "colour", "kind": "categorical", "categories": ["red", "green"]},
    ],
    "label": "label",
    "classes": [["no", "no."], "yes"],
    "id_column": "rid",
}


def write_csv(path, rows, header="rid,x1,colour,label"):
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def test_csv_encoding_uses_only_the_schema(tmp_path):
    schema = TabularSchema.from_dict(SCHEMA)
    assert schema.num_features == 4 and schema.classes == ("no", "yes")
    table = encode_table(write_csv(tmp_path / "t.csv", ["7,0,red,no", "9, 10 ,blue,no.", "3,-2.5,green,yes"]), schema)
    # x1: (clip(v) + 5) / 10; colour: red, green, other (blue is not declared)
    expected = [[0.5, 1, 0, 0], [1.0, 0, 0, 1], [0.25, 0, 1, 0]]
    assert torch.allclose(table.x, torch.tensor(expected))
    assert table.y.tolist() == [0, 0, 1] and table.ids.tolist() == [7, 9, 3]


def test_csv_errors_name_the_file_line_and_column(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    good = write_csv(tmp_path / "good.csv", ["1,0,red,no", "2,1,green,yes"])
    pool = write_csv(tmp_path / "pool.csv", ["0.5,red", "1,green"], header="x1,colour")
    data = load_files(good, pool, schema=tmp_path / "s.json")
    assert data.kind == "table" and data.public_y is None and data.private_ids.tolist() == [1, 2]
    extra = write_csv(tmp_path / "extra.csv", ["1,0,red,no,3"], header="rid,x1,colour,label,age")
    with pytest.raises(InputDataError, match=r"extra.csv: column 'age' is not in the schema"):
        load_files(extra, pool, schema=tmp_path / "s.json")
    missing = write_csv(tmp_path / "missing.csv", ["1,red,no"], header="rid,colour,label")
    with pytest.raises(InputDataError, match=r"missing.csv: missing column\(s\) \['x1'\]"):
        load_files(missing, pool, schema=tmp_path / "s.json")
    nan = write_csv(tmp_path / "nan.csv", ["1,0,red,no", "2,nan,red,yes"])
    with pytest.raises(InputDataError, match=r"nan.csv, row 3, column 'x1': NaN"):
        load_files(nan, pool, schema=tmp_path / "s.json")
    label = write_csv(tmp_path / "label.csv", ["1,0,red,maybe"])
    with pytest.raises(InputDataError, match=r"label.csv, row 2, column 'label': not a class of the schema"):
        load_files(label, pool, schema=tmp_path / "s.json")
    with pytest.raises(InputDataError, match="needs its public schema"):
        load_files(good, pool)
    with pytest.raises(SchemaError, match="numeric column 'x1' needs public bounds"):
        TabularSchema.from_dict({**SCHEMA, "columns": [{"name": "x1", "kind": "numeric"}]})


def write_images(folder, count, size=(16, 16), mode="RGB", seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    channels = {"RGB": 3, "L": 1}[mode]
    for i in range(count):
        arr = rng.integers(0, 256, size=(size[1], size[0], channels), dtype=np.uint8)
        PIL.fromarray(arr.squeeze(-1) if channels == 1 else arr, mode=mode).save(folder / f"img{i:03d}.png")


def test_image_folders(tmp_path):
    for name in ("cat", "dog"):
        write_images(tmp_path / "train" / name, 4)
        write_images(tmp_path / "test" / name, 2)
    write_images(tmp_path / "pool", 5)
    data = load_files(tmp_path / "train", tmp_path / "pool", tmp_path / "test")
    assert data.kind == "images" and data.class_names == ("cat", "dog")
    assert data.private_x.shape == (8, 3, 16, 16) and data.public_x.shape == (5, 3, 16, 16)
    assert data.private_y.tolist() == [0] * 4 + [1] * 4 and 0 <= float(data.private_x.min())
    # without an evaluation folder the classes must be declared (not read from the private sub-folders)
    with pytest.raises(InputDataError, match="declare the classes"):
        load_files(tmp_path / "train", tmp_path / "pool")
    with pytest.raises(InputDataError, match=r"sub-folder 'dog' is not a declared class \['cat'\]"):
        load_files(tmp_path / "train", tmp_path / "pool", classes=["cat"])
    with pytest.warns(EmptyClassWarning, match=r"class 2 \('bird'\) has no private example"):
        data = load_files(tmp_path / "train", tmp_path / "pool", classes=["cat", "dog", "bird"])
    assert data.num_classes == 3 and data.class_names == ("cat", "dog", "bird")  # declared, not read


def test_image_errors_name_the_file(tmp_path):
    for name in ("cat", "dog"):
        write_images(tmp_path / "train" / name, 3)
    write_images(tmp_path / "pool", 3)
    write_images(tmp_path / "train" / "dog", 1, size=(20, 16), seed=1)  # overwrites img000.png
    with pytest.raises(InputDataError, match=r"train/dog/img000.png: image of size 20×16.*must be 16×16"):
        load_files(tmp_path / "train", tmp_path / "pool", classes=["cat", "dog"])
    write_images(tmp_path / "labelled_pool" / "cat", 2)
    with pytest.raises(InputDataError, match=r"public pool .*labelled_pool has class sub-folders.*wrong place"):
        load_files(tmp_path / "train", tmp_path / "labelled_pool", classes=["cat", "dog"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputDataError, match=r"public pool .*empty holds no images"):
        load_files(tmp_path / "train", tmp_path / "empty", classes=["cat", "dog"])
    # the declared shape converts channels (grey → 1 channel) and fixes the size
    write_images(tmp_path / "train" / "dog", 1, seed=2)
    data = load_files(tmp_path / "train", tmp_path / "pool", classes=["cat", "dog"], image_shape=(1, 16, 16))
    assert data.private_x.shape == (6, 1, 16, 16)

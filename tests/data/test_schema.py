"""The public schema layer (DESIGN.md fact 6): encodings fixed before any private row is read."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.data.schema import OTHER, Column, TabularSchema, encode_table
from pate_stab.data.tabular import ADULT_FIELDS, adult_schema, adult_schema_from_names, magic_schema

SCHEMA = TabularSchema(
    columns=(
        Column("age", "numeric", bounds=(0.0, 100.0)),
        Column("colour", "categorical", categories=("red", "green")),
        Column("score", "numeric", bounds=(-1.0, 1.0)),
    ),
    label="y",
    classes=("no", "yes"),
    id_column="id",
    label_aliases={"yes.": "yes"},
)


def _csv(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_encoding_layout_and_values():
    assert SCHEMA.num_features == 1 + 3 + 1
    assert SCHEMA.feature_names == ["age", "colour=red", "colour=green", f"colour={OTHER}", "score"]
    rows = [
        {"id": "17", "age": "25", "colour": "green", "score": "0.5", "y": "yes", "extra": "ignored"},
        {"id": "-3", "age": 130, "colour": "purple", "score": -4, "y": "yes."},  # clipped; unseen → other
    ]
    t = encode_table(rows, SCHEMA)
    expected = torch.tensor([[0.25, 0, 1, 0, 0.75], [1.0, 0, 0, 1, 0.0]])
    assert t.x.dtype == torch.float32 and torch.allclose(t.x, expected)
    assert t.y is not None and t.y.tolist() == [1, 1] and t.y.dtype == torch.int64
    assert t.ids is not None and t.ids.tolist() == [17, -3]
    # a public pool has no label (nor ids): y and ids are None, x is the same
    pool = encode_table([{k: v for k, v in r.items() if k not in ("y", "id")} for r in rows], SCHEMA)
    assert pool.y is None and pool.ids is None and torch.equal(pool.x, t.x)
    with pytest.raises(ValueError, match=r"rows, row 2, column 'age': outside the public bounds"):
        encode_table(rows, SCHEMA, out_of_bounds="raise")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from(["red", "green", "blue", "?"]), st.floats(-5, 5)
        ),
        min_size=1,
        max_size=20,
    ),
    st.integers(0, 19),
)
def test_removing_a_row_changes_no_other_rows_encoding_nor_the_width(values, drop):
    rows = [{"age": a, "colour": c, "score": s} for a, c, s in values]
    full = encode_table(rows, SCHEMA)
    drop %= len(rows)
    part = encode_table(rows[:drop] + rows[drop + 1 :], SCHEMA)
    assert full.x.shape[1] == part.x.shape[1] == SCHEMA.num_features
    keep = [i for i in range(len(rows)) if i != drop]
    assert torch.equal(full.x[keep], part.x)
    assert bool(((full.x >= 0) & (full.x <= 1)).all())


def test_errors_name_the_file_the_row_and_the_column(tmp_path):
    header = "id,age,colour,score,y"
    ok = _csv(tmp_path / "ok.csv", [header, "1,30,red,0,no"])
    assert encode_table(ok, SCHEMA).x.shape == (1, 5)
    bad = {
        "missing.csv": (["id,age,score,y", "1,30,0,no"], r"missing\.csv: missing column\(s\) \['colour'\]"),
        "parse.csv": ([header, "1,30,red,0,no", "2,thirty,red,0,no"], r"parse\.csv, row 3, column 'age': cannot parse"),
        "nan.csv": ([header, "1,nan,red,0,no"], r"nan\.csv, row 2, column 'age': NaN"),
        "empty.csv": ([header, "1,30,red,,no"], r"empty\.csv, row 2, column 'score': missing value"),
        "label.csv": ([header, "1,30,red,0,maybe"], r"label\.csv, row 2, column 'y': not a class"),
        "id.csv": ([header, ",30,red,0,no"], r"id\.csv, row 2, column 'id': record id is empty"),
        "fields.csv": ([header, "1,30,red"], r"fields\.csv, row 2: 3 fields, expected 5"),
    }
    for name, (lines, message) in bad.items():
        with pytest.raises(ValueError, match=message):
            encode_table(_csv(tmp_path / name, lines), SCHEMA)
    with pytest.raises(FileNotFoundError, match="nothere.csv"):
        encode_table(tmp_path / "nothere.csv", SCHEMA)


def test_schema_files_round_trip_and_bad_schemas_are_refused(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA.to_dict()))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SCHEMA.to_dict()))
    for name in ("s.json", "s.yaml"):
        again = TabularSchema.from_file(tmp_path / name)
        assert again == SCHEMA and again.num_features == SCHEMA.num_features
    with pytest.raises(ValueError, match="needs public bounds"):
        Column("a", "numeric")
    with pytest.raises(ValueError, match="hi > lo"):
        Column("a", "numeric", bounds=(1.0, math.nan))
    with pytest.raises(ValueError, match="distinct categories"):
        Column("c", "categorical", categories=("x", "x"))
    with pytest.raises(ValueError, match="repeated"):
        TabularSchema(columns=(Column("y", "numeric", bounds=(0, 1)),), label="y", classes=("a", "b"))
    (tmp_path / "bad.json").write_text(json.dumps({"columns": [{"name": "a", "kind": "numeric"}]}))
    with pytest.raises(ValueError, match=r"bad\.json: .*needs public bounds"):
        TabularSchema.from_file(tmp_path / "bad.json")


def test_shipped_adult_schema_is_the_published_adult_names(shared_data):
    published = adult_schema_from_names(shared_data / "adult" / "adult.names")
    shipped = adult_schema()
    assert shipped.columns == published.columns and shipped.classes == published.classes == ("<=50K", ">50K")
    assert [c.name for c in shipped.columns] + ["income"] == list(ADULT_FIELDS)
    assert "Holand-Netherlands" in shipped.columns[-1].categories
    assert shipped.num_features == 113


def test_public_bounds_hold_for_the_shared_files(shared_data):
    # the a-priori bounds were not fitted to the rows, but none of the rows falls outside them
    path = shared_data / "adult" / "adult.data"
    adult = encode_table(path, adult_schema(), columns=ADULT_FIELDS, out_of_bounds="raise")
    assert adult.x.shape == (32_561, 113)
    names = [c.name for c in magic_schema().columns] + ["class"]
    magic = encode_table(shared_data / "magic" / "magic04.data", magic_schema(), columns=names, out_of_bounds="raise")
    assert magic.x.shape == (19_020, 10)


def test_headerless_files_comments_spellings_and_undeclared_columns(tmp_path):
    data = {
        "columns": [{"name": "age", "kind": "numeric", "bounds": [0, 100]},
                    {"name": "colour", "kind": "categorical", "categories": ["red", "green"]}],
        "label": "y", "classes": [["no", "no."], ["yes", "yes.", "Y"]], "id_column": "id",
        "header": False, "order": ["id", "y", "age", "colour"], "comment": "#",
    }  # fmt: skip
    schema = TabularSchema.from_dict(data)
    assert schema.classes == ("no", "yes") and schema.label_aliases == {"no.": "no", "yes.": "yes", "Y": "yes"}
    assert TabularSchema.from_dict(schema.to_dict()) == schema  # the spellings survive as aliases
    path = _csv(tmp_path / "t.data", ["# a comment line", "5,no.,50,red", "6,Y,150,blue", "7,yes,0,green"])
    t = encode_table(path, schema)
    assert t.ids.tolist() == [5, 6, 7] and t.y.tolist() == [0, 1, 1]
    assert torch.equal(t.x, torch.tensor([[0.5, 1, 0, 0], [1.0, 0, 0, 1], [0.0, 0, 1, 0]]))
    # without the comment prefix the comment line is a record with the wrong number of fields
    with pytest.raises(ValueError, match=r"t\.data, row 1: 1 fields, expected 4"):
        encode_table(path, TabularSchema.from_dict({**data, "comment": None}))
    with pytest.raises(ValueError, match="header: false needs 'order'"):
        TabularSchema.from_dict({**data, "order": ["id", "age", "colour"]})
    with pytest.raises(ValueError, match="given for two classes"):
        TabularSchema.from_dict({**data, "classes": [["no", "x"], ["yes", "x"]]})
    extra = [{"age": 1, "colour": "red", "score": 0, "weight": 3}]
    assert encode_table(extra, SCHEMA).x.shape == (1, 5)  # ignored by default
    with pytest.raises(ValueError, match=r"rows: column 'weight' is not in the schema"):
        encode_table(extra, SCHEMA, undeclared="raise")
    with pytest.raises(ValueError, match=r"rows, row 1, column 'age': not a finite number"):
        encode_table([{"age": "inf", "colour": "red", "score": 0}], SCHEMA)


def test_adult_recipe_schema_is_the_shipped_schema_for_headerless_files():
    from pathlib import Path

    recipe = TabularSchema.from_file(Path(__file__).resolve().parents[2] / "recipes" / "configs" / "adult_schema.json")
    shipped = adult_schema()
    assert recipe.columns == shipped.columns and recipe.classes == shipped.classes
    assert recipe.label_aliases == shipped.label_aliases and recipe.comment == shipped.comment == "|"
    assert not recipe.header and recipe.order == ADULT_FIELDS

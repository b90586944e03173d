"""A new user's survey tables (issue 44): categorical codes, a majority rate near 0.7, string ids.

Values outside the schema's categories are refused in every set, naming the file, the row, the
column and the value; ``predict`` refuses them too unless asked to map them to a declared fallback;
repeated ids are shown as written with their file rows; a file in another text encoding names the
file and the encoding option; a misnamed label column reads "label column 'X' not found".
"""

from __future__ import annotations

import json

import pytest
import torch

from pate_stab.data.own import InputDataError, load_files
from pate_stab.data.table_schema import SchemaError, TabularSchema
from tests.data.survey_tables import HEADER, SCHEMA, survey_files, survey_rows, write_csv


@pytest.fixture
def files(tmp_path):
    return survey_files(tmp_path / "survey")


def _load(files, **changes):
    paths = {k: files[k] for k in ("private", "public", "evaluation")} | changes
    return load_files(paths["private"], paths["public"], paths["evaluation"], schema=files["schema"])


def test_the_generated_tables_load_with_a_majority_near_0_7(files):
    data = _load(files)
    assert data.private_x.shape == (300, 2 + 7 + 6) and data.private_ids is not None
    assert 0.6 < float((data.private_y == 0).float().mean()) < 0.8


@pytest.mark.parametrize(
    ("role", "row_index", "column", "value"),
    [("private", 7, "occupation", "9"), ("public", 3, "occupation", "7"), ("evaluation", 11, "rating", "0")],
)
def test_a_category_outside_the_schema_is_refused_naming_file_row_column_value(files, role, row_index, column, value):
    path = files[role]
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    fields = lines[1 + row_index].split(",")
    fields[header.index(column)] = value
    lines[1 + row_index] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputDataError) as info:
        _load(files)
    message = str(info.value)
    # the file's row: the header is row 1, so record i (0-based) is row i + 2
    assert f"{path}, row {row_index + 2}, column {column!r}: value {value!r} is not a declared category" in message


def test_repeated_string_ids_are_shown_as_written_with_their_file_rows(files):
    rows = survey_rows(300, seed=1)
    rows[50][0] = rows[10][0]
    write_csv(files["private"], rows)
    with pytest.raises(InputDataError, match=r"rows 12 and 52 share id 'R00010' \(column 'rid'\)"):
        _load(files)
    rows[50][0] = "00012"  # the same number as id "12", written otherwise
    rows[10][0] = "12"
    write_csv(files["private"], rows)
    with pytest.raises(InputDataError, match=r"rows 12 and 52 share ids '12' and '00012' \(one number\)"):
        _load(files)


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_a_file_in_another_encoding_names_the_file_and_the_option_and_reads_with_it(files, encoding):
    rows = survey_rows(300, seed=1)
    rows[4][-1] = "né"  # not a class: reached only once the file is decoded
    write_csv(files["private"], rows, encoding=encoding)
    with pytest.raises(InputDataError) as info:
        _load(files)
    assert str(files["private"]) in str(info.value) and "--encoding" in str(info.value)
    pool = files["public"].read_text().splitlines()
    write_csv(files["public"], [r.split(",") for r in pool[1:]], header=pool[0].split(","), encoding=encoding)
    with pytest.raises(InputDataError, match=r"row 6, column 'affairs': not a class"):
        load_files(files["private"], files["public"], schema=files["schema"], encoding=encoding)
    rows[4][-1] = "no"
    write_csv(files["private"], rows, encoding=encoding)
    data = load_files(files["private"], files["public"], schema=files["schema"], encoding=encoding)
    assert data.private_x.shape[0] == 300 and data.public_x.shape[0] == 120


def test_a_misnamed_label_column_reads_label_column_not_found_with_the_closest(files, tmp_path):
    schema = dict(SCHEMA, label="affair")
    (tmp_path / "s.json").write_text(json.dumps(schema))
    with pytest.raises(InputDataError, match=r"label column 'affair' not found \(columns: .*the closest is 'affairs'"):
        load_files(files["private"], files["public"], schema=tmp_path / "s.json")


def test_a_fallback_must_be_a_declared_category(tmp_path):
    columns = [dict(SCHEMA["columns"][1], fallback="6")]
    schema = TabularSchema.from_dict(dict(SCHEMA, columns=columns))
    assert schema.columns[0].fallback == "6" and TabularSchema.from_dict(schema.to_dict()) == schema
    with pytest.raises(SchemaError, match="fallback '7' is not one of its categories"):
        TabularSchema.from_dict(dict(SCHEMA, columns=[dict(SCHEMA["columns"][1], fallback="7")]))
    with pytest.raises(SchemaError, match="not a categorical column"):
        schema.with_fallbacks({"age": "1"})
    # written only when declared: a schema without fallbacks keeps its dictionary
    assert "fallback" not in json.dumps(TabularSchema.from_dict(SCHEMA).to_dict())


def _student(schema: dict):
    from pate_stab.models.networks import ModelSpec, build_model
    from pate_stab.run.student_file import PublishedStudent

    sch = TabularSchema.from_dict(schema)
    spec = ModelSpec("logistic", (sch.num_features,), 2)
    torch.manual_seed(0)
    inputs = {"kind": "table", "shape": [sch.num_features], "schema": sch.to_dict()}
    return PublishedStudent(build_model(spec).eval(), spec, ("no", "yes"), inputs, [])


def test_predict_refuses_an_undeclared_category_unless_asked_to_use_a_fallback(tmp_path):
    student = _student(SCHEMA)
    rows = [r[1:5] for r in survey_rows(20, seed=5)]
    rows[3][1] = "7"  # occupation 7: not declared
    new = write_csv(tmp_path / "new.csv", rows, header=HEADER[1:5])
    with pytest.raises(SchemaError, match=r"new\.csv, row 5, column 'occupation': value '7' is not a declared"):
        student.read(new)
    with pytest.raises(SchemaError, match=r"declares no fallback category: give one with --fallback occupation="):
        student.read(new, unknown_categories="fallback")
    x, names = student.read(new, unknown_categories="fallback", fallbacks={"occupation": "6"})
    rows[3][1] = "6"
    as_six, _ = student.read(write_csv(tmp_path / "six.csv", rows, header=HEADER[1:5]))
    assert len(names) == 20 and torch.equal(x, as_six)
    # a fallback declared in the schema (stored in the student file) is used on request only
    declared = _student(dict(SCHEMA, columns=[dict(c, fallback="6") if c["name"] == "occupation" else c
                                              for c in SCHEMA["columns"]]))  # fmt: skip
    with pytest.raises(SchemaError, match="not a declared category"):
        declared.read(new)
    assert torch.equal(declared.read(new, unknown_categories="fallback")[0], as_six)


def test_cli_predict_refuses_without_usage_lines_and_maps_with_fallback(tmp_path, capsys):
    from pate_stab.cli import main

    run = tmp_path / "run"
    run.mkdir()
    _student(SCHEMA).save(run / "student.pt")
    rows = [r[1:5] for r in survey_rows(20, seed=5)]
    rows[3][1] = "7"
    new = write_csv(tmp_path / "new.csv", rows, header=HEADER[1:5])
    out = tmp_path / "p.csv"
    with pytest.raises(SystemExit) as info:
        main(["predict", "--run-dir", str(run), "--input", str(new), "--out", str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "usage:" not in err and "--unknown-category fallback" in err
    assert not out.exists()
    code = main(["predict", "--run-dir", str(run), "--input", str(new), "--out", str(out),
                 "--unknown-category", "fallback", "--fallback", "occupation=6"])  # fmt: skip
    assert code == 0 and len(out.read_text().splitlines()) == 21

"""Record ids may be strings ("P000123"): each becomes an int64 partition key through SHA-256 of
that id alone, and stays private (no published file holds it)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pate_stab.cli.commands import main
from pate_stab.data.own import InputDataError, own_data
from pate_stab.data.schema import TabularSchema, encode_table
from tests.run.test_own_data_run import CSV_SCHEMA, FLAGS, mixture, write_table


def test_string_ids_become_keys_of_their_own_record_alone():
    from pate_stab.data.table_encoding import record_id_key

    assert record_id_key("P000123") == record_id_key(" P000123 ") != record_id_key("P000124")
    assert record_id_key("42") == record_id_key(42) == 42  # integers stay themselves
    with pytest.raises(ValueError, match="empty"):
        record_id_key("  ")
    x, y = torch.randn(4, 2), torch.tensor([0, 1, 0, 1])
    ids = np.array(["P3", "P1", "P2", "P0"])
    data = own_data((x, y), x, classes=2, private_ids=ids)
    assert data.private_ids.dtype == torch.int64
    # removing a record changes no other record's key
    fewer = own_data((x[1:], y[1:]), x, classes=2, private_ids=list(ids[1:]))
    assert torch.equal(fewer.private_ids, data.private_ids[1:])
    with pytest.raises(InputDataError, match=r"records 0 and 2 \(0-based indices\) share id 'a'"):
        own_data((x, y), x, classes=2, private_ids=["a", "b", "a", "c"])


def test_csv_with_string_record_ids_runs_and_publishes_none(tmp_path, capsys):
    from pate_stab.data.table_encoding import record_id_key

    (px, py), (ux, uy), (ex, ey) = mixture(seed=4)
    write_table(tmp_path / "private.csv", px, py, ids=np.arange(len(px)))
    lines = (tmp_path / "private.csv").read_text().splitlines()
    rows = [f"P{int(line.split(',', 1)[0]):06d},{line.split(',', 1)[1]}" for line in lines[1:]]
    (tmp_path / "private.csv").write_text("\n".join([lines[0], *rows]) + "\n")
    write_table(tmp_path / "pool.csv", ux, uy, with_label=False)
    write_table(tmp_path / "eval.csv", ex, ey)
    (tmp_path / "schema.json").write_text(json.dumps(CSV_SCHEMA))
    table = encode_table(tmp_path / "private.csv", TabularSchema.from_dict(CSV_SCHEMA))
    assert table.ids[0] == record_id_key("P000000")
    args = ["transfer", "--private", str(tmp_path / "private.csv"), "--public", str(tmp_path / "pool.csv"),
            "--evaluation", str(tmp_path / "eval.csv"), "--schema", str(tmp_path / "schema.json"),
            "--partition-key", "record_id", "--neighbouring", "replace_one", "--checkpoints-dir", str(tmp_path / "ck"),
            "--run-name", "s", *FLAGS]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    run = tmp_path / "ck" / "s"
    report = json.loads((run / "report.json").read_text())
    assert report["privacy"]["teachers_changed_per_neighbour"] == 1
    for name in report["files"]["published"]:
        path = run / name
        if path.is_file():
            data = path.read_bytes()
            assert b"P0000" not in data and str(int(table.ids[0])).encode() not in data, name

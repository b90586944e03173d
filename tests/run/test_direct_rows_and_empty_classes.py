"""Three small defects of the fourth audit (D2–D4).

* D2: the label-DP learners (rr-lp1st, rr-lp2st, alibi) read no public size N: on the user's own data they
  run without ``private_size_hint`` (they were refused with DP-SGD's message); the heads still ask for it.
* D3: a compare of direct rows only asks no query, so the query count is not checked against the pool.
* D4: under label privacy a declared class without a private example runs, on D and on its neighbour
  alike: the published files differ only in the released outputs, and the warning is in no published file.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from pate_stab.cli.commands import main
from pate_stab.data.own import EmptyClassWarning, own_data
from pate_stab.run import run_compare, run_transfer
from pate_stab.run.direct import check_direct_config
from tests.run.interrupted_release_worker import lifecycle_config, lifecycle_data
from tests.run.test_neighbour_outputs import _published

LABEL = {"privacy_unit": "label", "neighbouring": "replace_one"}


def test_label_dp_learners_need_no_public_size(tmp_path: Path) -> None:
    cfg = lifecycle_config(str(tmp_path), "d2", **LABEL)  # own data (arrays): no documented size, no hint
    check_direct_config(cfg, ["rr-lp1st", "rr-lp2st", "alibi"])  # refused with DP-SGD's message before
    with pytest.raises(ValueError, match="needs a public size"):
        check_direct_config(cfg, ["rr-lp1st", "objective-softmax"])  # the heads still calibrate on N


def test_the_audits_label_dp_compare_on_own_files_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = lifecycle_data(n=300)
    np.savez(tmp_path / "priv_D.npz", x=data.private_x.numpy(), y=data.private_y.numpy())
    np.savez(tmp_path / "pool.npz", x=data.public_x.numpy())
    np.savez(tmp_path / "eval.npz", x=data.eval_x.numpy(), y=data.eval_y.numpy())
    assert main(["compare", "--private", str(tmp_path / "priv_D.npz"), "--public", str(tmp_path / "pool.npz"),
                 "--evaluation", str(tmp_path / "eval.npz"), "--classes", "3", "--privacy-unit", "label",
                 "--neighbouring", "replace_one", "--aggregators", "gnmax", "--direct", "rr-lp1st", "--epsilons", "2",
                 "--num-teachers", "30", "--num-queries", "40", "--set", "teacher_model=propagate",
                 "--student-epochs", "2", "--accelerator", "cpu", "--no-progress",
                 "--checkpoints-dir", str(tmp_path / "ck")]) == 0  # fmt: skip
    rows = json.loads(next((tmp_path / "ck").glob("*/compare.json")).read_text())["rows"]
    assert sorted(r["aggregator"] for r in rows) == ["gnmax", "rr-lp1st"]


def test_a_compare_of_direct_rows_only_asks_no_query(tmp_path: Path) -> None:
    # the default num_queries (500) exceeds the 200-point pool: no query is asked, so nothing to refuse
    cfg = lifecycle_config(str(tmp_path), "d3", num_queries=500, private_size_hint=400)
    out = run_compare(cfg, epsilons=[2.0], aggregators=[], direct=["objective-softmax"], data=lifecycle_data())
    assert [r["aggregator"] for r in out["rows"]] == ["objective-softmax"]
    with pytest.raises(ValueError, match="num_queries=500 exceeds the public pool"):  # a row that asks queries
        run_compare(lifecycle_config(str(tmp_path), "d3b", num_queries=500), epsilons=[2.0], aggregators=["gnmax"],
                    data=lifecycle_data())  # fmt: skip


def _one_example_of_class_2(change: bool):
    """The lifecycle data with one private example of class 2 (record ``i``), or its neighbour where that
    example's label is 0; the inputs are the same (label privacy)."""
    data = lifecycle_data()
    py = data.private_y.clone()
    twos = (py == 2).nonzero().flatten()
    py[twos[1:]] = 0
    if change:
        py[twos[0]] = 0
    return own_data((data.private_x, py), data.public_x, (data.eval_x, data.eval_y), classes=3,
                    public_y=data.public_y)  # fmt: skip


def test_a_class_without_a_private_example_runs_on_both_neighbours(tmp_path: Path) -> None:
    cfg = lifecycle_config(str(tmp_path), "d4", releaser_noise="seeded", epsilon=4.0, **LABEL)
    outcome = []
    for change in (False, True):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            data = _one_example_of_class_2(change)
        empty = [w for w in caught if issubclass(w.category, EmptyClassWarning)]
        assert len(empty) == int(change)  # the neighbour has no example of class 2: the holder is told
        shutil.rmtree(cfg.run_dir, ignore_errors=True)
        report = run_transfer(cfg, data=data)
        assert report["status"] == "complete"
        raw, masked, _ = _published(cfg.run_dir)
        outcome.append((raw, masked))
        for name, content in raw.items():
            assert b"no private example" not in content and b"EmptyClass" not in content, name
    (raw_d, masked_d), (raw_n, masked_n) = outcome
    assert set(raw_d) == set(raw_n)
    for name in raw_d:
        assert masked_d[name] == masked_n[name], f"{name} differs between the neighbours beyond the releases"

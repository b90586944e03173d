"""A new user's survey table (tests/run/survey_table.py: integer-coded answers, a majority rate near
0.7, string ids): the majority-class reference in every compare and transfer, flagged rows, direct
learners' students that predict, and the help's list of direct learners from the registry."""

from __future__ import annotations

import json

import pytest
import torch

from pate_stab.cli.commands import build_parser, main
from pate_stab.run.compare_table import format_rows
from pate_stab.run.config_names import DIRECT_LEARNER_NAMES
from pate_stab.run.direct import direct_legend
from pate_stab.run.reference import AT_OR_BELOW, flag_rows, majority_reference
from pate_stab.run.student_file import load_student
from tests.run.survey_table import SCHEMA, majority_rate, write_survey

SMALL = ["--num-teachers", "10", "--num-queries", "20", "--teacher-model", "logistic", "--teacher-epochs", "3",
         "--student-epochs", "3", "--accelerator", "cpu", "--no-progress", "--set", "private_size_hint=400",
         "--set", "dpsgd_epochs=3"]  # fmt: skip


@pytest.fixture(scope="module")
def survey(tmp_path_factory):
    root = tmp_path_factory.mktemp("survey")
    return root, write_survey(root, n_private=400, n_pool=150, n_eval=150, signal=0.5)


def _eval_labels(root):
    return [SCHEMA["classes"].index(line.rsplit(",", 1)[1]) for line in
            (root / "eval.csv").read_text().splitlines()[1:]]  # fmt: skip


def test_compare_help_lists_every_direct_learner_of_the_registry():
    compare = build_parser()._subparsers._group_actions[0].choices["compare"]  # type: ignore[union-attr]
    text = " ".join(compare.format_help().split())
    for name in DIRECT_LEARNER_NAMES:  # rr-lp1st, rr-lp2st and alibi included
        assert name in text.replace("- ", "-"), name


def test_majority_reference_flags_rows_at_or_below_it_and_the_best_line_says_so():
    reference = majority_reference(torch.tensor([1, 1, 0, 1, 1, 0, 1, 1, 0, 1]), ("no", "yes"), 2)
    assert reference["class"] == "yes" and reference["accuracy"] == pytest.approx(0.7)
    assert majority_reference(torch.tensor([], dtype=torch.int64), None, 2) is None
    rows = [
        {"aggregator": "gnmax", "privacy_unit": "record", "target_epsilon": 1.0, "epsilon": 1.0, "delta": 1e-5,
         "student_acc": 0.65, "note": ""},
        {"aggregator": "dpsgd-linear", "kind": "direct", "privacy_unit": "record", "target_epsilon": 1.0,
         "epsilon": 1.0, "delta": 1e-5, "neighbouring": "add_remove", "student_acc": 0.7, "note": "DP-SGD."},
        {"aggregator": "objective-softmax", "kind": "direct", "privacy_unit": "record", "target_epsilon": 2.0,
         "epsilon": 2.0, "delta": 0.0, "student_acc": 0.75, "note": ""},
    ]  # fmt: skip
    flag_rows(rows, reference)
    assert [r[AT_OR_BELOW] for r in rows] == [True, True, False]  # equal to the reference counts as at it
    assert rows[1]["note"].startswith("No better than always predicting 'yes' (0.7000)")
    table = format_rows(rows, run_neighbouring="add_remove", reference=reference)
    assert table.splitlines()[2].startswith("majority-class") and "0.7000" in table.splitlines()[2]
    best = direct_legend(rows, run_neighbouring="add_remove", reference=reference).splitlines()[-1]
    assert "ε=1: dpsgd-linear 0.7000 (direct) (no better than the majority class)" in best
    assert "At ε = 1 no row beats always predicting 'yes'" in best and "ε=2: objective-softmax 0.7500" in best


def test_compare_on_a_survey_table_has_the_reference_and_usable_direct_students(survey, tmp_path, capsys):
    root, files = survey
    args = ["compare", *files, "--aggregators", "lnmax", "--direct", "dpsgd-linear", "objective-softmax",
            "--epsilons", "2", "--checkpoints-dir", str(tmp_path), "--run-name", "c", *SMALL]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    run = tmp_path / "c"
    published = json.loads((run / "compare.json").read_text())
    reference = published["reference"]
    assert reference["accuracy"] == pytest.approx(majority_rate(root)) and reference["class"] == "yes"
    assert "majority-class" in (run / "compare.txt").read_text() and "majority-class" in out
    y = _eval_labels(root)
    for row in published["rows"]:
        assert row[AT_OR_BELOW] == (row["student_acc"] <= reference["accuracy"])
        assert ("No better than always predicting 'yes'" in row["note"]) == row[AT_OR_BELOW]
        if row.get("kind") != "direct":
            continue
        # a direct row's student: self-contained, its accuracy on the raw evaluation rows the row's own
        assert row["student_file"] == f"students/{row['aggregator']}_eps2_r0.pt"
        student = load_student(run / row["student_file"])
        assert student.accuracy(root / "eval.csv", y) == pytest.approx(row["student_acc"], abs=1e-12)
        recorded = list((run / "direct").glob(f"*{row['aggregator']}*.pt"))  # the file the spend recorded loads too
        assert len(recorded) == 1
        assert load_student(recorded[0]).accuracy(root / "eval.csv", y) == pytest.approx(row["student_acc"], abs=1e-12)
    assert main(["predict", "--run-dir", str(run), "--student", "dpsgd-linear_eps2_r0.pt", "--input",
                 str(root / "eval.csv"), "--out", str(tmp_path / "p.csv")]) == 0  # fmt: skip
    assert len((tmp_path / "p.csv").read_text().splitlines()) == 151


def test_direct_transfer_saves_a_student_that_predict_uses_and_reports_the_reference(survey, tmp_path, capsys):
    root, files = survey
    args = ["transfer", *files, "--aggregator", "objective-softmax", "--epsilon", "2", "--checkpoints-dir",
            str(tmp_path), "--run-name", "t", *SMALL]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    run = tmp_path / "t"
    report = json.loads((run / "report.json").read_text())
    assert report["majority_reference"]["accuracy"] == pytest.approx(majority_rate(root))
    flagged = report["test_accuracy"] <= report["majority_reference"]["accuracy"]
    assert report["at_or_below_majority"] == flagged and ("no better than always predicting" in out) == flagged
    assert "student.pt" in report["files"]["published"]
    assert main(["predict", "--run-dir", str(run), "--input", str(root / "eval.csv"), "--out",
                 str(tmp_path / "p.csv")]) == 0  # fmt: skip
    assert load_student(run).accuracy(root / "eval.csv", _eval_labels(root)) == pytest.approx(report["test_accuracy"])


def test_only_really_old_files_get_the_old_format_message(tmp_path):
    torch.save({"kind": "linear", "weight": torch.zeros(2, 3), "bias": torch.zeros(2), "epsilon": 1.0},
               tmp_path / "old_direct.pt")  # fmt: skip
    with pytest.raises(ValueError, match="direct learner's model written before direct models held their"):
        load_student(tmp_path / "old_direct.pt")
    torch.save({"weights": {}}, tmp_path / "old_student.pt")
    with pytest.raises(ValueError, match="written before the format held its preprocessing"):
        load_student(tmp_path / "old_student.pt")

"""A student is never reported as normal when it learnt nothing: a release with no answer stops the
run (no student, no report; non-zero exit) unless asked; a student of one class, or of fewer labels
than classes, is warned about in the terminal and the report; the plan says what "answers" means."""

from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from pate_stab.aggregation.plan import plan_run
from pate_stab.cli.commands import main

FLAGS = ["--num-teachers", "100", "--num-queries", "30", "--max-unstable", "3", "--epsilon", "8",
         "--teacher-epochs", "2", "--student-epochs", "2", "--accelerator", "cpu", "--no-progress",
         "--releaser-noise", "seeded"]  # fmt: skip


@pytest.fixture(scope="module")
def noise_files(tmp_path_factory):
    """Labels independent of the inputs: 100 teachers of 10 records each never agree, so the
    stability releaser answers nothing."""
    root = tmp_path_factory.mktemp("noise")
    g = np.random.default_rng(0)
    for name, n in (("private", 1000), ("eval", 100)):
        np.savez(root / f"{name}.npz", x=g.normal(size=(n, 5)).astype(np.float32), y=g.integers(0, 3, n))
    np.savez(root / "pool.npz", x=g.normal(size=(200, 5)).astype(np.float32))
    return ["--private", str(root / "private.npz"), "--public", str(root / "pool.npz"), "--evaluation",
            str(root / "eval.npz"), "--classes", "3"]  # fmt: skip


def test_a_release_without_answers_writes_no_student_and_exits_non_zero(noise_files, tmp_path, capsys):
    # stability asked for explicitly: without --aggregator a transfer on files follows the plan, which warns that
    # stability will rarely answer at 10 records a teacher and chooses another aggregator (docs/plan.md)
    args = ["transfer", *noise_files, "--checkpoints-dir", str(tmp_path), "--run-name", "none", "--aggregator",
            "stability", *FLAGS]  # fmt: skip
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "answered none of the 30 queries" in err and "no student was written" in err
    run = tmp_path / "none"
    assert not (run / "student.pt").exists() and not (run / "report.json").exists()
    assert (run / "ledger.jsonl").is_file()  # the spend stays recorded
    # asked for: the untrained student is kept, and the report and terminal say so
    assert main([*args, "--allow-empty-student"]) == 0
    out = capsys.readouterr().out
    assert "WARNING" in out and "no released label" in out
    report = json.loads((run / "report.json").read_text())
    assert report["student"]["trained_on"] == 0 and "no released label" in report["student"]["warnings"][0]


def test_compare_row_without_answers_has_no_student(noise_files, tmp_path, capsys):
    args = ["compare", *noise_files, "--checkpoints-dir", str(tmp_path), "--run-name", "c", "--epsilons", "8",
            "--aggregators", "stability", *FLAGS]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    (row,) = json.loads((tmp_path / "c" / "compare.json").read_text())["rows"]
    assert row["answered"] == 0 and row["student_acc"] is None and row["student_file"] is None
    assert "no student" in row["note"] and not (tmp_path / "c" / "students").exists()


def _release(labels):
    return SimpleNamespace(labels=torch.tensor(labels), soft=False, index=torch.arange(len(labels)))


def test_one_class_or_fewer_labels_than_classes_are_warned():
    from pate_stab.run.student import released_label_warnings

    names = ("low", "mid", "high")
    (one,) = released_label_warnings(_release([2, 2, -1, 2, 2]), 3, names)
    assert "4 released label(s), all of class 'high'" in one
    (few,) = released_label_warnings(_release([0, 1, -1]), 3, names)
    assert "covering 2 of 3 classes" in few and "'high'" in few
    assert released_label_warnings(_release([0, 1, 2, -1]), 3, names) == []


def test_plan_says_what_answers_means_at_this_k():
    text = plan_run(
        num_private=6000, num_classes=2, num_queries=200, epsilon=4.0, delta=1e-5, max_unstable=10, num_teachers=500
    ).text()
    line = next(x for x in text.splitlines() if x.strip().startswith("stability "))
    assert "answers only queries on which at least 90 % of the 500 teachers agree" in line
    gnmax = next(x for x in text.splitlines() if x.strip().startswith("gnmax"))
    assert "labels every query" in gnmax and "% of the 500 teachers agree" in gnmax


def test_cli_warnings_print_without_source_lines():
    from pate_stab.cli.commands import _format_warning
    from pate_stab.run.student import FewLabelsWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("few labels", FewLabelsWarning, stacklevel=1)
    w = caught[0]
    text = _format_warning(w.message, w.category, w.filename, w.lineno, None)
    assert text == "FewLabelsWarning: few labels\n"

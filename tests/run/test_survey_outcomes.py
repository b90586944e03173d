"""A new user's survey table (tests/run/survey_table.py: integer-coded answers, a majority rate near
0.7, string ids): the majority-class reference in every compare and transfer, flagged rows, direct
learners' students that predict, and the help's list of direct learners from the registry."""

from __future__ import annotations

import json

import pytest
import torch

from pate_stab.cli.commands import build_parser, main
from pate_stab.run.compare_table import AT_OR_BELOW, flag_rows, format_rows, majority_reference
from pate_stab.run.config.names import DIRECT_LEARNER_NAMES
from pate_stab.run.direct import direct_legend, run_direct
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


def test_direct_transfer_prints_its_own_plan_saves_a_student_and_reports_the_reference(survey, tmp_path, capsys):
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
    # what applies to a direct learner, not the teachers' plan
    assert "plan: objective-softmax trains directly on the private split" in out and "smallest k" not in out
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


def test_plan_warns_below_the_floor_and_recommends_what_will_answer():
    from pate_stab.aggregation.plan import K_FACTOR, RECORDS_PER_TEACHER_FLOOR, plan_run

    # the binary survey: 4,456 private records, m = 100, T = 2, k = 2 × stability's smallest k at ε = 1
    survey = plan_run(num_private=4456, num_classes=2, num_queries=100, epsilon=1.0, delta=1e-5, max_unstable=2,
                      num_teachers=610)  # fmt: skip
    stab = survey.row("stability")
    assert stab.answerable and 610 == K_FACTOR * stab.teachers_needed and 4456 / 610 < RECORDS_PER_TEACHER_FLOOR
    assert survey.stability_rarely_answers and survey.recommended == "gnmax"
    assert 4456 / survey.recommended_teachers >= RECORDS_PER_TEACHER_FLOOR
    text = survey.text()
    assert "WARNING: stability will rarely answer" in text and survey.recommendation.startswith("gnmax at k=")
    # one number per condition: a share of the teachers, no vote gap beside it; every verdict names its aggregator
    assert "vote gap" not in text and "(81 %" not in text
    for line in text.splitlines()[2:7]:
        name = line.split()[0]
        assert f"at k=610: {name} " in line and line.count("%") <= 1, line
    mnist = plan_run(num_private=60000, num_classes=10, num_queries=100, epsilon=8.0, delta=1e-5, max_unstable=2)
    assert not mnist.stability_rarely_answers and mnist.recommended == "stability"
    # ε = 4 on the same table: 29 records per teacher at 2 × stability's smallest k, where it answered nothing
    at4 = plan_run(num_private=4456, num_classes=2, num_queries=100, epsilon=4.0, delta=1e-5, max_unstable=2)
    assert at4.row("stability").teachers_needed == 77 and at4.recommended == "gnmax"
    tiny = plan_run(num_private=400, num_classes=2, num_queries=20, epsilon=1.0, delta=1e-5, max_unstable=2)
    assert tiny.recommended == "dpsgd-linear" and tiny.recommended_teachers is None


def test_transfer_without_an_aggregator_follows_the_plan_and_stability_is_warned_before_training(survey, tmp_path,
                                                                                                 capsys):  # fmt: skip
    root, files = survey
    base = [*files, "--epsilon", "1", "--max-unstable", "2", "--checkpoints-dir", str(tmp_path), *SMALL]
    assert main(["transfer", *base, "--run-name", "auto"]) == 0
    out = capsys.readouterr().out
    assert "no --aggregator given: following the plan's recommendation" in out
    assert json.loads((tmp_path / "auto" / "report.json").read_text())["aggregator"] == "dpsgd-linear"
    # without the public size N: the choice from n, the run's k kept (k = n / 30 would publish n), gnmax for dpsgd
    no_size = [a for a in base if a != "private_size_hint=400"]
    no_size.remove("--set")
    assert main(["transfer", *no_size, "--run-name", "auto_n", "--stop-after", "teachers"]) == 0
    out = capsys.readouterr().out
    assert "The run keeps k=10" not in out and "without it this run uses gnmax" in out
    assert json.loads((tmp_path / "auto_n" / "config.json").read_text())["aggregator"] == "gnmax"
    with pytest.raises(SystemExit) as refused:  # explicit stability: honoured, the warning first (here refused)
        main(["transfer", *base, "--aggregator", "stability", "--run-name", "stab"])
    assert refused.value.code == 2
    out = capsys.readouterr().out
    assert "WARNING: stability will rarely answer" in out and "stage teachers" not in out
    assert not (tmp_path / "stab" / "teachers").exists()


def test_confident_gnmax_answering_less_at_a_larger_epsilon_is_explained():
    from pate_stab.run.compare_table import CONFIDENT_FALLS_NOTE

    rows = [{"aggregator": "confident-gnmax", "privacy_unit": "record", "target_epsilon": e, "epsilon": e,
             "delta": 1e-5, "seen": 100, "answered": a, "student_acc": 0.6, "note": ""}
            for e, a in ((1.0, 87), (2.0, 53), (4.0, 10))]  # fmt: skip
    assert CONFIDENT_FALLS_NOTE in format_rows(rows, run_neighbouring="add_remove")
    rising = [dict(r, answered=a) for r, a in zip(rows, (10, 53, 87), strict=True)]
    assert CONFIDENT_FALLS_NOTE not in format_rows(rising, run_neighbouring="add_remove")


def test_confident_gnmax_answers_fewer_weak_votes_at_a_larger_epsilon_by_its_calibration():
    """The cause, measured on the mechanism itself: the same votes released at ε = 1, 2, 4 with σ1, σ2
    as calibrated for each ε (the plan's closed form of the registry's calibration) and the threshold
    0.6 k at every ε. Votes below the threshold (45 % for the top class) pass less often as ε grows;
    votes above it (75 %) more often."""
    from pate_stab.aggregation.baselines import ConfidentGNMax
    from pate_stab.aggregation.plan import plan_run

    k, m = 300, 200
    answered = {}
    for eps in (1.0, 2.0, 4.0):
        noise = plan_run(num_private=20000, num_classes=3, num_queries=m, epsilon=eps, delta=1e-5, max_unstable=2,
                         num_teachers=k).row("confident-gnmax").noise  # fmt: skip
        for share, counts in ((0.45, [135, 90, 75]), (0.75, [225, 45, 30])):
            agg = ConfidentGNMax(threshold=noise["threshold"], sigma1=noise["sigma1"], sigma2=noise["sigma2"],
                                 num_queries=m, delta=1e-5, noise="seeded")  # fmt: skip
            agg.release(torch.tensor([counts] * m), generator=torch.Generator().manual_seed(1))
            answered[share, eps] = agg.summary()["answered"]
    assert answered[0.45, 1.0] > answered[0.45, 2.0] > answered[0.45, 4.0]
    assert answered[0.75, 1.0] < answered[0.75, 2.0] < answered[0.75, 4.0]


def test_a_dpsgd_cnn_row_publishes_a_student_that_reads_raw_images(tmp_path):
    from pate_stab.run.prepare import prepare
    from pate_stab.run.report import open_ledger
    from tests.run.test_direct_cnn import SMALL as CNN_SMALL
    from tests.run.test_direct_cnn import _config, _data

    data = _data()
    prep = prepare(_config(tmp_path, "cnn"), check_budget=False, data=data)
    with open_ledger(prep.run_dir, run_name="cnn", budget_epsilon=10.0, budget_delta=1e-3,
                     neighbouring=prep.config.release.neighbouring) as ledger:  # fmt: skip
        row = run_direct(prep, ledger, learner="dpsgd-cnn", epsilon=4.0, dpsgd=CNN_SMALL, student_file="student.pt")
    student = load_student(prep.run_dir / "student.pt")
    assert student.network_kind == "tanh-cnn" and student.inputs["shape"] == [1, 16, 16]
    assert student.accuracy(data.eval_x, data.eval_y) == pytest.approx(row["student_acc"], abs=1e-12)
    (recorded,) = (prep.run_dir / "direct").glob("*.pt")
    assert load_student(recorded).accuracy(data.eval_x, data.eval_y) == pytest.approx(row["student_acc"], abs=1e-12)

"""Private-kNN through every front door: the API on the user's own arrays, compare beside the teachers'
aggregators and a direct learner in one ledger, the plan, and the CLI's plan. Small n and m."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from pate_stab import Data, compare, transfer
from pate_stab.aggregation.data_dependent import THEIRS_KEY
from pate_stab.aggregation.plan import plan_run
from pate_stab.aggregation.private_knn import exact_sampling_rate
from pate_stab.cli.commands import main
from pate_stab.data.synthetic import make_gaussian_mixture
from pate_stab.rng import seeded_generator

SMALL = dict(num_teachers=15, num_queries=40, epsilon=4.0, knn_sampling_rate=0.4, student_epochs=5,
             accelerator="cpu", progress=False, neighbouring="add_remove", releaser_noise="seeded")  # fmt: skip


def _mixture():
    x, y = make_gaussian_mixture(900, num_classes=3, dim=6, separation=6.0, generator=seeded_generator(0))
    return (x[:600], y[:600]), (x[600:800], y[600:800]), (x[800:], y[800:])


def _ledger(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _event_types(event: dict) -> set[str]:
    found = {event["type"]}
    for key in ("event", "events"):
        inner = event.get(key)
        for e in inner if isinstance(inner, list) else [inner] if isinstance(inner, dict) else []:
            found |= _event_types(e)
    return found


def test_api_transfer_on_own_arrays_asks_no_teachers(tmp_path):
    private, (ux, uy), evaluation = _mixture()
    result = transfer(
        Data.arrays(private, ux.numpy(), evaluation, classes=3, public_y=uy),
        checkpoints_dir=str(tmp_path),
        run_name="knn",
        aggregator="confident-private-knn",
        **SMALL,
    )
    report = result.report
    assert report["aggregator"] == "confident-private-knn" and report["teacher_model"] is None
    assert report["epsilon"] <= 4.0 + 1e-6 and report["queries"]["answered"] >= 10
    assert report["label_accuracy_answered"] > 0.9 and report["student"]["test_accuracy"] > 0.8
    assert Fraction(report["calibration"]["sampling_rate_exact"]) == exact_sampling_rate(0.4)
    assert not (tmp_path / "knn" / "teachers").exists()
    spends = [r for r in _ledger(tmp_path / "knn" / "ledger.jsonl") if r.get("kind") == "spend"]
    assert len(spends) == 1 and "poisson_sampled" in _event_types(spends[0]["event"])
    # [ZYWW20]'s own figure: in the private diagnostics (0600), labelled as theirs, in no published file
    path = tmp_path / "knn" / "private_diagnostics.json"
    theirs = json.loads(path.read_text())["data_dependent"][THEIRS_KEY]
    assert path.stat().st_mode & 0o777 == 0o600
    assert theirs["queries_asked"] == 40 and theirs["queries_answered"] == report["queries"]["answered"]
    assert "theirs" in theirs["label"] and 0 < theirs["epsilon"]
    assert all("zyww20" not in p.read_text() for p in (tmp_path / "knn").glob("*.json") if p != path)


def test_compare_row_beside_teachers_and_a_direct_learner(tmp_path):
    private, (ux, uy), evaluation = _mixture()
    settings = SMALL | {"num_teachers": 20, "teacher_epochs": 3, "teacher_lr": 0.1, "private_size_hint": 600}
    out = compare(
        Data.arrays(private, ux, evaluation, classes=3, public_y=uy),
        epsilons=[4.0],
        aggregators=["gnmax", "private-knn"],
        direct=["output-softmax"],
        checkpoints_dir=str(tmp_path),
        run_name="cmp",
        **settings,
    )
    rows = {r["aggregator"] if "aggregator" in r else r.get("learner"): r for r in out.rows}
    assert {"gnmax", "private-knn"} <= set(rows)
    knn = rows["private-knn"]
    assert knn["answered"] == 40 and knn["label_acc"] > 0.9 and knn["epsilon"] <= 4.0 + 1e-6
    spends = [r for r in _ledger(tmp_path / "cmp" / "ledger.jsonl") if r.get("kind") == "spend"]
    assert len(spends) == 3  # gnmax, private-knn and the direct learner: one ledger
    assert "private-knn" in out.table
    # without a threshold every query is answered: [ZYWW20]'s figure is the row's certified ε, kept private
    private = json.loads((tmp_path / "cmp" / "private_compare.json").read_text())
    theirs = [r[THEIRS_KEY] for r in private["rows"] if r.get("aggregator") == "private-knn"]
    assert len(theirs) == 1 and theirs[0]["epsilon"] == pytest.approx(knn["epsilon"], rel=1e-9)
    assert all(THEIRS_KEY not in r for r in private["rows"] if r.get("aggregator") == "gnmax")
    assert "zyww20" not in (tmp_path / "cmp" / "compare.json").read_text()


def test_plan_answers_at_the_users_n_epsilon_and_k():
    plan = plan_run(num_private=60000, num_classes=10, num_queries=1000, epsilon=1.0, delta=1e-5, max_unstable=10,
                    num_teachers=300, knn_sampling_rate=0.05)  # fmt: skip
    knn, gnmax = plan.row("private-knn"), plan.row("gnmax")
    assert knn.answerable and not gnmax.answerable  # subsampling: far less noise for the same ε
    assert knn.noise["sigma"] < gnmax.noise["sigma"] / 10
    assert plan.row("confident-private-knn").noise["threshold"] == pytest.approx(180.0)
    small = plan_run(num_private=2000, num_classes=10, num_queries=1000, epsilon=1.0, delta=1e-5, max_unstable=10,
                     num_teachers=300, knn_sampling_rate=0.05)  # fmt: skip
    assert not small.row("private-knn").answerable  # 100 sampled records for K = 300
    assert "fewer sampled records than K" in small.text()
    with pytest.raises(KeyError):
        plan_run(num_private=600, num_classes=3, num_queries=10, epsilon=1.0, delta=1e-5, max_unstable=3).row(
            "private-knn"
        )


def test_cli_plan_with_a_sampling_rate(capsys):
    assert main(["plan", "--num-private", "60000", "--num-classes", "10", "--num-queries", "1000", "--epsilon", "1",
                 "--num-teachers", "300", "--knn-sampling-rate", "0.05"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "private-knn" in out and "confident-private-knn" in out


def test_release_from_a_votes_file_is_refused(tmp_path, capsys):
    """Private-kNN draws its votes inside the release: a votes file cannot stand for them (exit 2)."""
    import numpy as np

    path = tmp_path / "votes.npy"
    np.save(path, np.zeros((5, 4), dtype=np.int64))
    with pytest.raises(SystemExit) as info:
        main(["release", "--votes", str(path), "--num-classes", "3", "--aggregator", "private-knn", "--epsilon", "1",
              "--out", str(tmp_path / "out")])  # fmt: skip
    assert info.value.code == 2
    assert "does not read a votes file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_transfer_prints_a_neighbour_vote_run(tmp_path, capsys):
    args = ["transfer", "--dataset", "synthetic", "--aggregator", "private-knn", "--num-teachers", "10",
            "--num-queries", "20", "--epsilon", "4", "--student-epochs", "2", "--accelerator", "cpu", "--no-progress",
            "--checkpoints-dir", str(tmp_path), "--run-name", "cli_knn", "--set", "num_private=400",
            "--set", "num_public=100", "--set", "num_eval=100", "--set", "knn_sampling_rate=0.5"]  # fmt: skip
    assert main(args) == 0
    assert "nearest private records of a fresh sample vote (Private-kNN)" in capsys.readouterr().out

"""pate-stab release: votes from another program in, labels out, with every aggregator; bad input spends nothing."""

from __future__ import annotations

import json
import os
import re
import stat

import numpy as np
import pytest
import torch

from pate_stab.aggregation.base import inputs_digest
from pate_stab.cli.commands import main
from pate_stab.errors import BudgetExhaustedError
from pate_stab.run.release_votes import VotesError, load_votes, release_votes


@pytest.fixture
def votes(tmp_path):
    rng = np.random.default_rng(0)
    k, n = 1500, 120
    truth = rng.integers(0, 10, n)
    pred = np.where(rng.random((k, n)) < 0.9, truth, rng.integers(0, 10, (k, n)))  # another program's teachers
    np.save(tmp_path / "votes.npy", pred)
    return tmp_path / "votes.npy", truth


def _release(path, out, *extra):
    """`pate-stab release` of ``path`` at ε = 8 with the flags ``extra`` (C10: the fixture's 10 classes)."""
    return main(["release", "--votes", str(path), "--out", str(out), "--epsilon", "8", *extra])


C10 = ("--num-classes", "10")


@pytest.mark.parametrize("aggregator", ["stability", "stability-paper", "lnmax", "gnmax", "confident-gnmax"])
def test_every_histogram_aggregator(votes, tmp_path, capsys, aggregator):
    path, truth = votes
    out = tmp_path / aggregator
    assert _release(path, out, "--aggregator", aggregator, *C10) == 0
    labels = np.load(out / "labels.npy")
    report = json.loads((out / "report.json").read_text())
    assert labels.shape == (120,) and report["votes"]["num_teachers"] == 1500
    assert report["votes"]["num_classes"] == 10
    answered = labels != -1
    assert answered.sum() == report["queries"]["answered"] > 100
    assert (labels[answered] == truth[answered]).mean() > 0.95
    assert report["epsilon"] <= 8 * (1 + 1e-12) and report["ledger"]["num_spends"] == 1
    lines = (out / "labels.csv").read_text().splitlines()
    assert lines[0] == "query,label" and len(lines) == 121


def test_soft_labels_from_scores(tmp_path):
    rng = np.random.default_rng(1)
    scores = np.clip(rng.normal(0.8, 0.02, size=(400, 30)), 0, 1)
    np.save(tmp_path / "scores.npy", np.stack([1 - scores, scores], axis=2))  # k × n × 2
    report = release_votes(tmp_path / "scores.npy", aggregator="stability-soft", epsilon=8.0, delta=1e-5,
                           out_dir=tmp_path / "soft", layout="scores", max_unstable=3)  # fmt: skip
    labels = np.load(tmp_path / "soft" / "labels.npy")
    assert labels.dtype == np.float64 and report["queries"]["answered"] > 0
    assert np.nanmax(np.abs(labels - 0.8)) <= 0.1


def test_rerun_replays_and_other_votes_are_refused(votes, tmp_path, capsys):
    path, _ = votes
    out = tmp_path / "r"
    assert _release(path, out, "--aggregator", "gnmax", *C10) == 0
    first = np.load(out / "labels.npy")
    ledger = (out / "ledger.jsonl").read_bytes()
    assert _release(path, out, "--aggregator", "gnmax", "--seed", "7", *C10) == 0  # another seed: still a replay
    assert np.array_equal(np.load(out / "labels.npy"), first)
    assert "replayed from the ledger" in capsys.readouterr().out
    assert (out / "ledger.jsonl").read_bytes() == ledger
    other = np.load(path)
    other[:, 0] = (other[:, 0] + 1) % 10
    np.save(tmp_path / "other.npy", other)
    with pytest.raises(SystemExit) as info:
        _release(tmp_path / "other.npy", out, "--aggregator", "gnmax", *C10)
    assert info.value.code == 2 and "other votes" in capsys.readouterr().err
    assert (out / "ledger.jsonl").read_bytes() == ledger


def test_published_files_hold_no_digest_of_the_votes(votes, tmp_path):
    """The votes are private: their identity is a MAC in a 0600 file, never a digest in the ledger or report."""
    path, _ = votes
    out = tmp_path / "p"
    report = release_votes(path, aggregator="stability", epsilon=8.0, delta=1e-5, out_dir=out, num_classes=10)
    counts, _ = load_votes(path, num_classes=10)
    unkeyed = inputs_digest(counts)
    for name in report["files"]["published"]:
        assert unkeyed not in (out / name).read_bytes().decode("latin-1"), name
    assert set(report["files"]["private"]) == {"private_identity.json", "private_key", "private_ledger_anchor.json"}
    for name in report["files"]["private"]:
        assert (out / name).stat().st_mode & 0o777 == 0o600, name
    macs = json.loads((out / "private_identity.json").read_text())["votes_mac"]
    assert list(macs) == [report["ledger"]["spend_id"]] == ["p:stability:eps=8.0"]


def _bad_files(tmp_path):
    cases = {}

    def save(name, array):
        np.save(tmp_path / f"{name}.npy", array)
        return tmp_path / f"{name}.npy"

    cases["rank"] = (save("rank", np.zeros((2, 3, 4), dtype=np.int64)), [], "rank 3")
    cases["label range"] = (save("range", np.array([[0, 1, 10], [1, 1, 2]])), ["--num-classes", "10"], r"\[0, 10\)")
    cases["negative label"] = (save("neg", np.array([[0, -1], [1, 1]])), ["--num-classes", "2"], "class labels")
    cases["nan"] = (save("nan", np.array([[0.0, np.nan], [1.0, 1.0]])), ["--num-classes", "2"], "NaN")
    cases["non-integer"] = (save("frac", np.array([[0.5, 1.0], [1.0, 1.0]])), ["--num-classes", "2"], "integers")
    # DESIGN.md fact 11: C is declared, never the largest label voted + 1
    cases["undeclared classes"] = (save("undecl", np.array([[0, 1], [1, 9]])), [], "declare the number of classes")
    cases["one class"] = (save("one", np.array([[0, 0], [0, 0]])), ["--num-classes", "1"], "at least 2")
    cases["counts width"] = (save("width", np.array([[3, 1], [2, 2]])), ["--layout", "counts", "--num-classes", "3"],
                             "2 columns but num_classes=3")  # fmt: skip
    cases["negative counts"] = (save("negc", np.array([[3, -1], [1, 1]])), ["--layout", "counts"], "non-negative")
    cases["unequal rows"] = (save("uneq", np.array([[3, 1], [1, 1]])), ["--layout", "counts"], "same number")
    (tmp_path / "empty.csv").write_text("")
    cases["empty"] = (tmp_path / "empty.csv", [], "empty")
    cases["missing"] = (tmp_path / "nope.npy", [], "not found")
    return cases


def test_bad_input_exits_2_and_spends_nothing(votes, tmp_path, capsys):
    path, _ = votes
    out = tmp_path / "b"
    assert _release(path, out, "--aggregator", "stability", *C10) == 0  # a ledger with one spend
    ledger = (out / "ledger.jsonl").read_bytes()
    for name, (bad, extra, message) in _bad_files(tmp_path).items():
        with pytest.raises(SystemExit) as info:
            _release(bad, out, "--aggregator", "lnmax", *extra)
        err = capsys.readouterr().err
        assert info.value.code == 2, name
        assert re.search(message, err), (name, err)
        assert (out / "ledger.jsonl").read_bytes() == ledger, name


def _only_one_votes_nine(tmp_path):
    """DESIGN.md fact 11's pair: 60 teachers × 40 queries over classes 0–8; in D one teacher casts the
    only vote for class 9, in D′ it votes 8 instead."""
    rng = np.random.default_rng(3)
    d = rng.integers(0, 9, (60, 40))
    d[17, 5] = 9
    d_prime = d.copy()
    d_prime[17, 5] = 8
    np.save(tmp_path / "d.npy", d)
    np.save(tmp_path / "d_prime.npy", d_prime)
    return tmp_path / "d.npy", tmp_path / "d_prime.npy"


@pytest.mark.parametrize("aggregator", ["stability", "lnmax", "gnmax", "confident-gnmax"])
def test_class_count_is_declared_never_read_from_the_votes(tmp_path, capsys, aggregator):
    """Without a declared C, teacher predictions are refused (exit 2, VotesError) and no ledger is
    opened; with C declared, both neighbours release over the same range [0, C) with the same noise."""
    d, d_prime = _only_one_votes_nine(tmp_path)
    out = tmp_path / "undeclared"
    with pytest.raises(VotesError, match="declare the number of classes"):
        release_votes(d, aggregator=aggregator, epsilon=8.0, delta=1e-5, out_dir=out, allow_unanswerable=True)
    with pytest.raises(SystemExit) as info:
        main(["release", "--votes", str(d), "--out", str(out), "--aggregator", aggregator, "--epsilon", "8",
              "--allow-unanswerable"])  # fmt: skip
    assert info.value.code == 2 and "--num-classes" in capsys.readouterr().err
    assert not out.exists()  # nothing opened, nothing spent
    labels, reports = [], []
    for name, path in (("d", d), ("d_prime", d_prime)):
        report = release_votes(path, aggregator=aggregator, epsilon=8.0, delta=1e-5, out_dir=tmp_path / name,
                               num_classes=10, noise="seeded", seed=4, allow_unanswerable=True)  # fmt: skip
        reports.append(report)
        labels.append(np.load(tmp_path / name / "labels.npy"))
    assert reports[0]["votes"]["num_classes"] == reports[1]["votes"]["num_classes"] == 10
    assert labels[0].shape == labels[1].shape == (40,)
    # the same seeded noise on both sides (its shape is m × C, C declared): only query 5's label may move
    assert np.array_equal(np.delete(labels[0], 5), np.delete(labels[1], 5))


def test_csv_and_pt_read_like_npy(votes, tmp_path):
    path, _ = votes
    pred = np.load(path)
    np.savetxt(tmp_path / "v.csv", pred, fmt="%d", delimiter=",")
    torch.save(torch.from_numpy(pred), tmp_path / "v.pt")
    a = load_votes(path, num_classes=10)[0]
    assert torch.equal(load_votes(tmp_path / "v.csv", num_classes=10)[0], a)
    assert torch.equal(load_votes(tmp_path / "v.pt", num_classes=10)[0], a)
    with pytest.raises(VotesError, match="layout 'scores'"):
        release_votes(path, aggregator="stability-soft", epsilon=1.0, delta=1e-5, out_dir=tmp_path / "x")


def test_export_votes_is_owner_only(tmp_path, capsys):
    args = ["transfer", "--checkpoints-dir", str(tmp_path), "--run-name", "ex", "--num-teachers", "20",
            "--num-queries", "20", "--teacher-epochs", "1", "--student-epochs", "1", "--epsilon", "30",
            "--set", "num_private=1000", "--set", "num_public=60", "--set", "num_eval=50", "--allow-unanswerable",
            "--allow-empty-student",
            "--accelerator", "cpu", "--no-progress", "--export-votes", str(tmp_path / "votes.npy")]  # fmt: skip
    assert main(args) == 0
    written = tmp_path / "votes.npy"
    assert stat.S_IMODE(os.stat(written).st_mode) == 0o600
    votes = np.load(written)
    assert votes.shape == (20, 60) and votes.dtype == np.int64
    assert "PRIVATE" in capsys.readouterr().out


@pytest.mark.parametrize("aggregator", ["lnmax", "gnmax", "confident-gnmax"])
def test_default_noise_differs_between_releases_with_the_same_seed(tmp_path, aggregator, capsys):
    """`release --votes` draws from the OS by default: the same seed (0) gives different noise."""
    rng = np.random.default_rng(1)
    np.save(tmp_path / "split.npy", rng.integers(0, 2, (40, 300)))  # split votes: the noise decides
    labels = []
    for out in ("a", "b"):
        assert main(["release", "--votes", str(tmp_path / "split.npy"), "--out", str(tmp_path / out), "--epsilon",
                     "0.5", "--aggregator", aggregator, "--confident-threshold", "0",
                     "--num-classes", "2"]) == 0  # fmt: skip
        report = json.loads((tmp_path / out / "report.json").read_text())
        assert report["noise"]["noise"] == "secure" and "warning" not in report["noise"]
        labels.append(np.load(tmp_path / out / "labels.npy"))
    assert "noise: secure" in capsys.readouterr().out
    assert not np.array_equal(labels[0], labels[1])


def test_seeded_release_warns_and_a_mode_switch_is_refused(votes, tmp_path, capsys):
    path, _ = votes
    out = tmp_path / "s"
    assert _release(path, out, "--aggregator", "gnmax", "--noise", "seeded", *C10) == 0
    report = json.loads((out / "report.json").read_text())
    assert "NO privacy against anyone who knows the seed" in report["noise"]["warning"]
    assert "SEEDED" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:  # the recorded labels carry the seeded guarantee only
        _release(path, out, "--aggregator", "gnmax", *C10)
    assert info.value.code == 2 and "noise='seeded'" in capsys.readouterr().err


def test_the_output_folders_budget_cap_refuses_a_release_past_it(votes, tmp_path, capsys):
    """--budget-epsilon is recorded at the first release; later releases into the folder must fit what it leaves
    (refused before any noise, the ledger unchanged); the cap may be lowered, never raised."""
    path, _ = votes
    out = tmp_path / "capped"
    assert _release(path, out, *C10, "--aggregator", "gnmax", "--budget-epsilon", "10", "--budget-delta", "1e-4") == 0
    header = json.loads((out / "ledger.jsonl").read_text().splitlines()[0])
    assert (header["budget_epsilon"], header["budget_delta"]) == (10.0, 1e-4)
    assert (
        main(["release", "--votes", str(path), "--out", str(out), *C10, "--epsilon", "1.5", "--aggregator", "lnmax"])
        == 0
    )
    before = (out / "ledger.jsonl").read_bytes()
    with pytest.raises(SystemExit) as exc:  # 9.5 spent of 10: another ε = 1 does not fit
        main(["release", "--votes", str(path), "--out", str(out), *C10, "--epsilon", "1", "--aggregator", "gnmax"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "budget cap is (epsilon=10" in err and "Nothing was drawn" in err
    assert (out / "ledger.jsonl").read_bytes() == before
    with pytest.raises(SystemExit):  # a cap is never raised
        main(["release", "--votes", str(path), "--out", str(out), *C10, "--epsilon", "1", "--aggregator", "gnmax",
              "--budget-epsilon", "20"])  # fmt: skip
    assert "never raised" in capsys.readouterr().err and (out / "ledger.jsonl").read_bytes() == before
    report = release_votes(
        path, aggregator="gnmax", epsilon=8.0, delta=1e-5, num_classes=10, out_dir=out, budget_epsilon=9.75
    )
    assert report["reused"] and report["ledger"]["budget"]["epsilon"] == 9.75  # lowered, and recorded
    records = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert [r["change"] for r in records if r["kind"] == "budget"] == ["lower"]


def test_a_release_above_the_users_cap_is_refused_before_the_ledger(votes, tmp_path):
    path, _ = votes
    with pytest.raises(BudgetExhaustedError, match=r"cap is \(epsilon=4.*needs \(epsilon=8"):
        release_votes(
            path,
            aggregator="gnmax",
            epsilon=8.0,
            delta=1e-5,
            num_classes=10,
            out_dir=tmp_path / "o",
            budget_epsilon=4.0,
        )
    assert (
        not (tmp_path / "o" / "ledger.jsonl").exists() or "spend" not in (tmp_path / "o" / "ledger.jsonl").read_text()
    )
    with pytest.raises(VotesError, match="budget_delta"):
        release_votes(
            path, aggregator="gnmax", epsilon=8.0, delta=1e-5, num_classes=10, out_dir=tmp_path / "p", budget_delta=1.5
        )


def test_a_rerun_on_a_ledger_cut_after_its_last_spend_is_refused(votes, tmp_path, capsys):
    """The spend and result lines removed cleanly: the anchor beside the ledger refuses the rerun (no fresh noise)."""
    path, _ = votes
    out = tmp_path / "cut"
    assert _release(path, out, *C10, "--aggregator", "gnmax") == 0
    lines = (out / "ledger.jsonl").read_text().splitlines(keepends=True)
    assert [json.loads(line)["kind"] for line in lines[-2:]] == ["spend", "result"]
    (out / "ledger.jsonl").write_text("".join(lines[:-2]))
    labels = (out / "labels.npy").read_bytes()
    with pytest.raises(SystemExit) as exc:
        _release(path, out, *C10, "--aggregator", "gnmax")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "ends before the last recorded line" in err and "truncated or restored" in err
    assert (out / "labels.npy").read_bytes() == labels and "spend" not in (out / "ledger.jsonl").read_text()

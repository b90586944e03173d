"""pate-stab release with the public points' inputs: the main job's query selection, labels in file
order, no peeking at votes outside the releaser; a budget at which the stability releaser cannot
answer is refused before anything is spent; --progress / --no-progress."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pate_stab.cli.commands import main
from pate_stab.errors import ReplayedSpendError
from pate_stab.run.release_votes import UnanswerableError, VotesError, release_votes
from tests.selection.test_selection import K, _pool


@pytest.fixture
def files(tmp_path):
    x, votes = _pool()  # 600 points in 3 blobs: unanimous at the centres, split towards the edges
    np.save(tmp_path / "counts.npy", votes.numpy())
    np.save(tmp_path / "x.npy", x.numpy())
    return tmp_path / "counts.npy", tmp_path / "x.npy", votes


def _release(votes_path, out, **kw):
    kw = {"aggregator": "stability", "epsilon": 4.0, "delta": 1e-5, "layout": "counts", "max_unstable": 6} | kw
    return release_votes(votes_path, out_dir=out, **kw)


def test_selection_answers_more_than_file_order_and_keeps_file_order(files, tmp_path):
    counts, x, votes = files
    first = _release(counts, tmp_path / "first")
    spread = _release(counts, tmp_path / "spread", public_inputs=x)
    assert first["query_selection"] == {"strategy": "first"}
    assert spread["query_selection"]["strategy"] == "spread"
    assert spread["queries"]["answered"] > 2 * first["queries"]["answered"]
    labels = np.load(tmp_path / "spread" / "labels.npy")
    order = spread["query_selection"]["order"]
    assert labels.shape == (600,) and len(set(order)) == len(order)
    answered = labels != -1
    assert int(answered.sum()) == spread["queries"]["answered"]
    assert set(np.flatnonzero(answered)) <= set(order)  # only asked queries carry labels
    plurality = votes.argmax(1).numpy()
    assert (labels[answered] == plurality[answered]).all()  # file order: each label on its own row


def test_selection_does_not_depend_on_votes_never_asked(files, tmp_path):
    counts, x, votes = files
    # one noise draw for both releases (seeded): the selection may then differ only by the votes it saw
    one = _release(counts, tmp_path / "one", public_inputs=x, noise="seeded")
    asked = torch.tensor(one["query_selection"]["order"])
    assert asked.numel() < votes.shape[0]  # the releaser halted: some queries were never asked
    other = torch.zeros_like(votes)
    other[:, 0] = K  # every query never asked becomes unanimous: the most attractive there is
    other[asked] = votes[asked]
    np.save(tmp_path / "other.npy", other.numpy())
    two = _release(tmp_path / "other.npy", tmp_path / "two", public_inputs=x, noise="seeded")
    assert two["query_selection"]["order"] == one["query_selection"]["order"]
    assert np.array_equal(np.load(tmp_path / "one" / "labels.npy"), np.load(tmp_path / "two" / "labels.npy"))


def test_rerun_with_another_selection_is_refused(files, tmp_path):
    counts, x, _ = files
    _release(counts, tmp_path / "r", public_inputs=x)
    ledger = (tmp_path / "r" / "ledger.jsonl").read_bytes()
    with pytest.raises(ReplayedSpendError, match="query selection 'spread', not 'first'"):
        _release(counts, tmp_path / "r")
    assert (tmp_path / "r" / "ledger.jsonl").read_bytes() == ledger


def test_bad_public_inputs(files, tmp_path):
    counts, x, _ = files
    np.save(tmp_path / "short.npy", np.load(x)[:10])
    with pytest.raises(VotesError, match="10 rows but the votes hold 600"):
        _release(counts, tmp_path / "b", public_inputs=tmp_path / "short.npy")
    with pytest.raises(VotesError, match="needs the public points' inputs"):
        _release(counts, tmp_path / "b", query_selection="spread")
    assert not (tmp_path / "b" / "ledger.jsonl").exists()


def _small_k_votes(tmp_path, k=150, n=450):
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 10, n)
    pred = np.where(rng.random((k, n)) < 0.8, truth, rng.integers(0, 10, (k, n)))
    np.save(tmp_path / "small.npy", pred)
    return tmp_path / "small.npy"


def test_unanswerable_stability_is_refused_before_spending(tmp_path, capsys):
    path = _small_k_votes(tmp_path)  # the case: k = 150, ε = 8, T = 10 (stability needs k ≈ 207)
    out = tmp_path / "u"
    with pytest.raises(UnanswerableError, match="needs k ≥ 207"):
        release_votes(path, aggregator="stability", epsilon=8.0, delta=1e-5, out_dir=out, num_classes=10)
    assert not (out / "ledger.jsonl").exists()
    with pytest.raises(SystemExit) as info:
        main(["release", "--votes", str(path), "--out", str(out), "--aggregator", "stability", "--epsilon", "8",
              "--num-classes", "10"])  # fmt: skip
    err = capsys.readouterr().err
    assert info.value.code == 2 and "gnmax" in err and "Nothing was spent" in err
    assert not (out / "ledger.jsonl").exists()
    # the same budget through GNMax labels every query
    assert main(["release", "--votes", str(path), "--out", str(tmp_path / "g"), "--aggregator", "gnmax",
                 "--epsilon", "8", "--num-classes", "10"]) == 0  # fmt: skip
    assert json.loads((tmp_path / "g" / "report.json").read_text())["queries"]["answered"] == 450
    # asked for explicitly, it runs (and spends); seeded noise, so that the few queries a release may still
    # answer by chance at this k are the same every run
    report = release_votes(path, aggregator="stability", epsilon=8.0, delta=1e-5, out_dir=out, num_classes=10,
                           allow_unanswerable=True, noise="seeded", seed=0)  # fmt: skip
    assert report["queries"]["answered"] == 0 and (out / "ledger.jsonl").exists()


def test_release_progress_flags(files, tmp_path, capsys):
    counts, _, _ = files
    args = ["release", "--votes", str(counts), "--layout", "counts", "--aggregator", "gnmax", "--epsilon", "4"]
    assert main([*args, "--out", str(tmp_path / "p1"), "--no-progress"]) == 0
    assert "release GNMax" not in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "p2"), "--progress"]) == 0
    assert "release GNMax" in capsys.readouterr().err

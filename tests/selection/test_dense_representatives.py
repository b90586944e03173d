"""The "dense" choice of k-means representatives (``selection_representatives``, pate_stab.selection.representatives).

Round 0 of the spread / student-confidence selection and its class discovery ask about one point
per k-means cluster. ``"dense"`` takes the cluster's densest member (smallest distance to its k-th
nearest member) instead of the member nearest the centroid. Both use public inputs only: under label
privacy the pool holds the private inputs, never their labels, so the first round must not move when
private labels change.
"""

from __future__ import annotations

import json

import pytest
import torch

import pate_stab.run.data as run_data
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.selection.adaptive_batches import release_in_adaptive_batches
from pate_stab.selection.representatives import REPRESENTATIVE_CHOICES, dense_representatives, kmeans_representatives


def _valley():
    """One cluster made of two dense blobs and a lone point at their mean (the centroid's valley)."""
    gen = torch.Generator().manual_seed(0)
    left = torch.tensor([-5.0, 0.0]) + 0.3 * torch.randn(60, 2, generator=gen)
    right = torch.tensor([5.0, 0.0]) + 0.3 * torch.randn(40, 2, generator=gen)
    centre = torch.cat([left, right]).mean(0, keepdim=True)
    return torch.cat([left, right, centre])  # row 100: the point nearest the centroid


def test_dense_takes_a_blob_member_where_the_centroid_lies_in_a_valley():
    x = _valley()
    assert kmeans_representatives(x, 1, generator=torch.Generator().manual_seed(0)).tolist() == [100]
    pick = int(dense_representatives(x, 1, generator=torch.Generator().manual_seed(0)))
    assert pick < 100  # inside one of the blobs, not the lone point between them


def test_dense_representatives_are_distinct_one_per_cluster():
    gen = torch.Generator().manual_seed(3)
    centres = torch.tensor([[0.0, 0.0], [50.0, 0.0], [0.0, 50.0]])
    x = torch.cat([c + torch.randn(40, 2, generator=gen) for c in centres])
    picks = dense_representatives(x, 3, generator=torch.Generator().manual_seed(0))
    assert sorted((picks // 40).tolist()) == [0, 1, 2]
    many = dense_representatives(x, 200, generator=torch.Generator().manual_seed(0))  # small clusters: fallback
    assert many.numel() == 120 and many.unique().numel() == 120


def test_first_round_is_the_dense_representatives_whatever_the_labels():
    x = _valley()
    x = torch.cat([x, x + torch.tensor([0.0, 30.0])])  # two clusters of 101 points
    offered = []
    for labels in (torch.zeros(202, dtype=torch.int64), torch.arange(202) % 3):

        def release(index, labels=labels):
            offered.append(index.clone())
            return labels[index]

        release_in_adaptive_batches(x, num_queries=2, strategy="spread", release=release, halted=lambda: False,
                          spread=lambda i, y: (torch.ones(202, 4) / 4, torch.ones(202)), round_size=2,
                          max_unstable=None, generator=torch.Generator().manual_seed(0),
                          representatives="dense")  # fmt: skip
    reps = dense_representatives(x, 10, generator=torch.Generator().manual_seed(0))
    assert torch.equal(offered[0], offered[1]) and torch.equal(offered[0], reps[:2])
    assert 100 not in offered[0].tolist() and 201 not in offered[0].tolist()  # no valley point


def _first_round(tmp_path, monkeypatch, *, change: bool) -> list[int]:
    original = run_data._raw_splits

    def splits(config, generator):
        (px, py, ux, uy, ex, ey), num_classes = original(config, generator)
        if change:  # every private label moved: far beyond one neighbour
            py = (py + 1) % num_classes
        return [px, py, ux, uy, ex, ey], num_classes

    monkeypatch.setattr(run_data, "_raw_splits", splits)
    config = TransferConfig(
        run_name="dense" + ("_changed" if change else ""), checkpoints_dir=str(tmp_path), privacy_unit="label",
        neighbouring="replace_one", label_queries="both", teacher_model="propagate", num_teachers=30,
        num_private=300, num_public=100, num_eval=100, graph_neighbors=8, graph_power=1.0, num_queries=60,
        aggregator="stability", epsilon=8.0, max_unstable=5, query_selection="spread", selection_round_size=5,
        selection_representatives="dense", stop_after="release", accelerator="cpu", releaser_noise="seeded",
        allow_unanswerable=True,
    )  # fmt: skip
    run_transfer(config)
    lines = [json.loads(line) for line in (config.run_dir / "ledger.jsonl").read_text().splitlines()]
    selection = next(r["payload"]["selection"] for r in lines if r.get("kind") == "result")
    assert selection["representatives"] == "dense"
    return selection["index"][: selection["rounds"][0]["size"]]


def test_changing_private_labels_does_not_change_the_first_round(tmp_path, monkeypatch):
    first = _first_round(tmp_path, monkeypatch, change=False)
    assert len(first) == 5
    assert _first_round(tmp_path, monkeypatch, change=True) == first


def test_an_unknown_choice_is_refused_by_name():
    assert REPRESENTATIVE_CHOICES == ("centroid", "dense")
    with pytest.raises(ValueError, match="selection_representatives must be one of centroid, dense"):
        TransferConfig(selection_representatives="densest")
    with pytest.raises(ValueError, match="selection_representatives must be one of"):
        release_in_adaptive_batches(torch.zeros(4, 2), num_queries=1, strategy="spread", release=lambda i: i,
                          halted=lambda: False, spread=lambda i, y: (torch.ones(4, 2), torch.ones(4)),
                          generator=torch.Generator(), representatives="mode")  # fmt: skip

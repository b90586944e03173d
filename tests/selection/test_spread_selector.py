"""One spread selection for the main job and ``release --votes``: :class:`SpreadSelector`.

The main job's release stage (:func:`pate_stab.run.release.release_labels`, ``query_selection="spread"``)
and ``release --votes`` with public inputs select through the same object with the same settings; given
the same votes, public inputs and seed they ask the same queries in the same order and release the same
labels. The release stage does not import the student stage.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from pate_stab.aggregation.registry import AggregatorSettings
from pate_stab.rng import seeded_generator
from pate_stab.run.config import TransferConfig
from pate_stab.run.data import Task
from pate_stab.run.prepare import Prepared
from pate_stab.run.release import release_labels
from pate_stab.run.release_votes import VotesError, release_votes
from pate_stab.run.report import open_ledger
from pate_stab.selection.spread import SPREAD_DEFAULTS, SpreadSelector, SpreadSettings
from tests.selection.test_selection import K, _pool
from tests.test_import_graph import _graph

EPS, DELTA, T, SEED = 4.0, 1e-5, 6, 3


class _FileVotes:
    """The teachers' votes of the main job (``prep.votes``), here read from the same counts as the votes file."""

    device, seconds = "cpu", 0.0

    def __init__(self, counts: torch.Tensor) -> None:
        self.counts = counts

    def histograms(self, index: torch.Tensor) -> torch.Tensor:
        return self.counts[index]


def _prepared(tmp_path, x: torch.Tensor, counts: torch.Tensor) -> Prepared:
    """A main-job run whose public pool is ``x`` and whose teachers voted ``counts`` on it."""
    config = TransferConfig(
        checkpoints_dir=str(tmp_path / "runs"), run_name="job", query_selection="spread", num_queries=x.shape[0],
        num_teachers=K, epsilon=EPS, delta=DELTA, max_unstable=T, releaser_noise="seeded", progress=False,
    )  # fmt: skip
    empty = torch.empty(0, x.shape[1])
    task = Task(empty, torch.empty(0, dtype=torch.int64), x, None, empty, torch.empty(0, dtype=torch.int64),
                num_classes=counts.shape[1], threat_model="public-pool")  # fmt: skip
    config.run_dir.mkdir(parents=True)
    return Prepared(config, config.run_dir, task, teachers=None, votes=_FileVotes(counts), timings={},  # type: ignore[arg-type]
                    resumed_teachers=False, generators={})  # fmt: skip


def test_transfer_and_release_votes_choose_the_same_queries_through_one_selector(tmp_path, monkeypatch):
    x, counts = _pool()  # 600 points in 3 blobs, K teachers' vote counts
    np.save(tmp_path / "counts.npy", counts.numpy())
    np.save(tmp_path / "x.npy", x.numpy())
    seen: list[tuple[SpreadSelector, torch.Tensor]] = []
    select = SpreadSelector.select

    def recording(self, pool_x, **kwargs):
        out = select(self, pool_x, **kwargs)
        seen.append((self, out.index))
        return out

    monkeypatch.setattr(SpreadSelector, "select", recording)
    prep = _prepared(tmp_path, x, counts)
    # the same releaser settings on both sides: ε, δ, m = the pool, k, T, seeded noise
    assert prep.config.aggregator_settings(EPS) == AggregatorSettings(
        epsilon=EPS, delta=DELTA, num_queries=600, num_teachers=K, max_unstable=T, calibration="tight", gamma=0.1,
        confident_fraction=0.6, sigma_ratio=2.0, teachers_changed=1, noise="seeded",
    )  # fmt: skip
    ledger = open_ledger(
        prep.run_dir, run_name="job", budget_epsilon=EPS, budget_delta=DELTA, neighbouring="add_remove"
    )
    with ledger:
        job = release_labels(prep, ledger, aggregator="stability", epsilon=EPS, generator=seeded_generator(SEED),
                             selection_generator=seeded_generator(SEED))  # fmt: skip
    report = release_votes(tmp_path / "counts.npy", aggregator="stability", epsilon=EPS, delta=DELTA,
                           out_dir=tmp_path / "votes", layout="counts", max_unstable=T, noise="seeded", seed=SEED,
                           public_inputs=tmp_path / "x.npy")  # fmt: skip
    assert len(seen) == 2, "both front doors select through SpreadSelector.select"
    (job_selector, job_order), (votes_selector, votes_order) = seen
    assert job_selector.settings == votes_selector.settings == SPREAD_DEFAULTS
    assert torch.equal(job_selector.adjacency.to_dense(), votes_selector.adjacency.to_dense())  # one graph
    assert job.selection["strategy"] == report["query_selection"]["strategy"] == "spread"
    assert job.index.tolist() == job_order.tolist() == votes_order.tolist() == report["query_selection"]["order"]
    assert job.selection["rounds"] == report["query_selection"]["rounds"]
    assert int(job.summary["answered"]) == report["queries"]["answered"] > 0
    in_file_order = np.load(tmp_path / "votes" / "labels.npy")
    assert in_file_order[job.index.numpy()].tolist() == job.labels.tolist()


def test_spread_defaults_are_the_main_jobs():
    """The main job's graph and selection defaults are the selector's (one place: SPREAD_DEFAULTS)."""
    assert SpreadSettings.of(TransferConfig()) == SPREAD_DEFAULTS
    names = set(TransferConfig().to_dict())  # every setting by its flat name
    assert {f.name for f in dataclasses.fields(SpreadSettings)} <= names


def test_release_votes_refuses_a_pool_too_small_for_the_graph_before_opening_the_ledger(tmp_path):
    x, counts = _pool()
    np.save(tmp_path / "counts.npy", counts[:40].numpy())
    np.save(tmp_path / "x.npy", x[:40].numpy())
    with pytest.raises(VotesError, match="kNN graph cannot be built: need more than num_neighbors=50"):
        release_votes(tmp_path / "counts.npy", aggregator="stability", epsilon=EPS, delta=DELTA,
                      out_dir=tmp_path / "out", layout="counts", public_inputs=tmp_path / "x.npy")  # fmt: skip
    assert not (tmp_path / "out" / "ledger.jsonl").exists()


def test_the_release_stage_does_not_import_the_student_stage():
    """run/release (the release stage) and pate_stab.selection reach run/student by no chain of imports."""
    graph = _graph()
    for start in ("pate_stab.run.release", "pate_stab.selection.spread"):
        reached, todo = {start}, [start]
        while todo:
            for target in graph.get(todo.pop(), {}):
                if target.startswith("pate_stab.run.") and target not in reached:
                    reached.add(target)
                    todo.append(target)
        assert "pate_stab.run.student" not in reached, start

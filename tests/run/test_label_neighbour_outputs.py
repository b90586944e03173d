"""Label-privacy neighbours give the same published files, except for the released outputs.

DESIGN.md fact 13 and the record version, ``tests/run/test_neighbour_outputs.py`` (whose helpers
this reuses): under ``privacy_unit: label`` two data sets are neighbours when one private record's
*label* differs. The main job runs on D and on D with one private label changed, in the same run
folder, with seeded noise. Then every top-level entry of the run folder is listed in the report's
``files`` section; every published file is byte-identical between D and D′ except for the released
outputs and what is computed from them (and wholly identical where the releases are); at most one
teacher's votes differ (checked on the private teachers) and some queried vote does differ.

The label-privacy teachers read every input (the propagation graph spans the private and public
inputs), the queries may be the private inputs themselves (``label_queries``), and the content
keys hash the inputs only: a digest of the private labels in a published file, a shard that follows
the label, or a published label accuracy on the private queries makes one of the checks fail.
"""

from __future__ import annotations

import pytest
import torch

import pate_stab.run.data as run_data
from pate_stab.run import TransferConfig
from tests.run.test_neighbour_outputs import _run_pair


def _change_private_label(index: int):
    """A wrapper of ``_raw_splits`` that changes private record ``index``'s label once applied."""
    original = run_data._raw_splits

    def install(monkeypatch: pytest.MonkeyPatch, *, change: bool = True) -> None:
        def splits(config: TransferConfig, generator: torch.Generator):
            (px, py, ux, uy, ex, ey), num_classes = original(config, generator)
            if change:
                py = py.clone()
                py[index] = (py[index] + 1) % num_classes
            return [px, py, ux, uy, ex, ey], num_classes

        monkeypatch.setattr(run_data, "_raw_splits", splits)

    return install


@pytest.mark.parametrize(
    ("teacher_model", "label_queries", "aggregator"),
    [
        pytest.param("propagate", "private", "lnmax", id="propagate-private-lnmax"),
        pytest.param("propagate", "both", "stability", id="propagate-both-stability"),
        pytest.param("logistic", "both", "gnmax", id="logistic-both-gnmax"),
        pytest.param("propagate", "pool", "lnmax", id="propagate-pool-lnmax"),
    ],
)
def test_one_changed_label(tmp_path, monkeypatch, teacher_model, label_queries, aggregator):
    config = TransferConfig(
        run_name="lnb", checkpoints_dir=str(tmp_path), privacy_unit="label", neighbouring="replace_one",
        label_queries=label_queries,
        teacher_model=teacher_model, num_teachers=60, num_private=600, num_public=200, num_eval=200, separation=2.0,
        num_queries={"pool": 200, "private": 600, "both": 700}[label_queries], aggregator=aggregator, epsilon=20.0,
        max_unstable=5, teacher_epochs=2, teacher_lr=0.1, graph_neighbors=8, graph_power=1.0, student_epochs=2,
        accelerator="cpu", releaser_noise="seeded", allow_unanswerable=True,
    )  # fmt: skip
    assert config.teachers_changed == 1
    install = _change_private_label(index=7)
    install(monkeypatch, change=False)  # D
    _run_pair(config, monkeypatch, install)


@pytest.mark.parametrize("label_queries", ["private", "pool"])
def test_one_changed_label_private_knn(tmp_path, monkeypatch, label_queries):
    """Private-kNN under label privacy: neighbours in the (public) input space, a changed label moves one vote."""
    config = TransferConfig(
        run_name="lnb", checkpoints_dir=str(tmp_path), privacy_unit="label", neighbouring="replace_one",
        label_queries=label_queries, num_teachers=20, num_private=600, num_public=200, num_eval=200, separation=2.0,
        num_queries={"pool": 200, "private": 600}[label_queries], aggregator="confident-private-knn", epsilon=20.0,
        knn_sampling_rate=0.5, student_epochs=2, accelerator="cpu", releaser_noise="seeded",
    )  # fmt: skip
    install = _change_private_label(index=7)
    install(monkeypatch, change=False)
    _run_pair(config, monkeypatch, install, neighbour_votes=True)

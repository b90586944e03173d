"""Neighbouring data sets give the same published files, except for the released outputs.

DESIGN.md facts 1, 6 and 8: a run's published files may depend on the private data only through
its mechanism's outputs. For each data source and each partition mode, the main job (``transfer``)
runs on D and on D with one private record removed (add/remove neighbours), in the same run
folder, with the release's noise fixed (``releaser_noise="seeded"``, the same seed). Then

* every top-level entry of the run folder is listed in the report's ``files`` section, as
  published or as private;
* every published file is byte-identical between D and D′, except for the released outputs and
  what is computed from them: the labels and counters in the ledger, the release counts, the
  selection rounds, label and student accuracy and the student's weights. Where the released
  outputs are equal as well, everything published must be byte-identical, the student included;
* at most one teacher's votes on the public pool differ between D and D′ (one record moves one
  teacher; checked on the teachers themselves, which are private), and some vote on a queried
  point does differ: the settings (small shards) make the pair sensitive to anything published
  that depends on the votes.

A digest of private data in a published file (the feature cache's name, the ledger's record of
the votes), a vocabulary read from the private rows, or record ids that are row numbers (every
later record changes shard) make one of these checks fail.

``compare`` with mixed learners is checked the same way: PATE's aggregators, the stability releaser
and direct learners (DP-SGD, an output-perturbation head) in one add/remove ledger. Published may
differ only in the aggregator rows' released labels and what follows from them, and in the direct
learners' models and their accuracies; a row whose output is the same on both sides is identical in
full; every spend states the ledger's relation; the private count (which the direct learners must
not calibrate on: they use the public ``private_size_hint``) appears in no published file.

``pate-stab release --votes`` (bring your own teachers) is checked on votes files directly: D′ moves
one teacher's vote, the only vote for class 9, to class 8. With the class count declared, every
published file is identical but for the released labels and their counters, and the output range
is the declared C on both sides; without it the command is refused (DESIGN.md fact 11).

"Remove one private record": ``pate_stab.run.data._raw_splits`` is wrapped (synthetic, MNIST;
the MNIST subset is taken there too), or the data file itself loses one row (Adult, so that the
loader sees the neighbour as it would be on disk; a user's own CSV with its public schema and id
column, ``dataset: files``). The production code path is unchanged.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import pate_stab.run.data as run_data
import pate_stab.run.prepare as run_prepare
from pate_stab.cli.commands import main
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.compare_table import AT_OR_BELOW
from pate_stab.run.prepare import neighbour_index, prepare

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

RELEASED = "<released output>"
# report.json fields computed from the released outputs (and public data)
REPORT_RELEASED = (
    ("queries",),
    ("label_accuracy_answered",),
    ("label_accuracy_all_queries",),
    ("query_selection", "rounds"),
    ("query_selection", "offered"),
    ("student", "test_accuracy"),
    ("student", "history"),
    ("student", "trained_on"),
    ("student", "unlabelled_pool_accuracy"),
    ("student", "unlabelled_pool_size"),
    ("student", "selection"),  # student_select "cv": scores on the released labels and the choice
    ("student", "config", "lr"),  # student_select "cv": the chosen learning rate
    ("student", "warnings"),  # sentences on the released labels and on the student's accuracy
    ("at_or_below_majority",),  # the student's accuracy against the public majority-class reference
)
# fields of a release call's or a release's record in the ledger that are its outputs
OUTPUT_RELEASED = ("labels", "status", "state")
SUMMARY_RELEASED = ("answered", "abstained", "queries_seen", "halted", "not_asked", "answered_plain",
                    "answered_shifted", "replayed_calls")  # fmt: skip
SELECTION_RELEASED = ("rounds", "index", "offered")


def _mask(data: dict[str, Any], path: tuple[str, ...]) -> None:
    for key in path[:-1]:
        data = data.get(key, {})
    if isinstance(data, dict) and path[-1] in data:
        data[path[-1]] = RELEASED


def _masked_ledger_line(record: dict[str, Any]) -> dict[str, Any]:
    """One ledger line without its released outputs (and the digests chained over them)."""
    record = {k: v for k, v in record.items() if k not in ("sha256", "prev")}
    outputs = []
    if isinstance(record.get("output"), dict):
        outputs.append(record["output"])
    if record.get("kind") == "output":
        outputs.append(record["payload"])
    for out in outputs:
        for key in OUTPUT_RELEASED:
            if key in out:
                out[key] = RELEASED
    if record.get("kind") == "result" and "model" in record["payload"]:
        record["payload"]["sha256"] = RELEASED  # a direct learner's model (its output), by its digest
    elif record.get("kind") == "result":
        payload = record["payload"]
        payload["labels"] = RELEASED
        for key in SUMMARY_RELEASED:
            if key in payload.get("summary", {}):
                payload["summary"][key] = RELEASED
        for key in SELECTION_RELEASED:
            if key in payload.get("selection", {}):
                payload["selection"][key] = RELEASED
    return record


def _released(run_dir: Path) -> list[Any]:
    """The released outputs as recorded in the ledger: labels and the queried pool positions."""
    lines = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
    return [(r["payload"]["labels"], r["payload"].get("selection")) for r in lines if r["kind"] == "result"]


def _published(run_dir: Path) -> tuple[dict[str, bytes], dict[str, Any], list[Any]]:
    """(raw bytes of every published file, the same with released outputs masked, the released outputs)."""
    report = json.loads((run_dir / "report.json").read_text())
    # what a run publishes at least, if the report does not say (its absence fails in _run_pair)
    files = report.get("files", {"published": ["config.json", "report.json", "ledger.jsonl", "student.pt"]})
    if "private" in files:
        listed = set(files["published"]) | {name.rstrip("/") for name in files["private"]}
        present = {p.name for p in run_dir.iterdir()}
        assert present <= listed, f"files neither published nor private: {sorted(present - listed)}"
    raw, masked = {}, {}
    for name in files["published"]:
        data = (run_dir / name).read_bytes()
        raw[name] = data
        if name == "report.json":
            view = json.loads(data)
            for path in REPORT_RELEASED:
                _mask(view, path)
            masked[name] = view
        elif name == "ledger.jsonl":
            masked[name] = [_masked_ledger_line(json.loads(line)) for line in data.decode().splitlines()]
        elif name == "student.pt":
            masked[name] = RELEASED  # the student is trained on the released labels
        else:
            masked[name] = data
    return raw, masked, _released(run_dir)


def _teacher_votes(config: TransferConfig) -> torch.Tensor:
    prep = prepare(config, check_budget=False)  # reloads (or rebuilds) the run's teachers
    return prep.teachers.predict_votes(prep.task.public_x)  # (k, n)


def _neighbour_votes(config: TransferConfig) -> torch.Tensor:
    """Private-kNN's votes without sampling (every coin kept): (m, C) on the pool (private data: a check only)."""
    prep = prepare(config, check_budget=False)
    index = neighbour_index(prep)
    queries = prep.task.public_x.flatten(1).float()
    return index.histograms(queries, lambda b: torch.ones(b, index.size, dtype=torch.bool),
                            num_neighbours=config.teachers.num_teachers)  # fmt: skip


def _one_vote_moved(config: TransferConfig, votes_d: torch.Tensor, votes_n: torch.Tensor) -> None:
    """Neighbour votes: every query's histogram moves by at most one vote in and one out; some queried one moves."""
    moved = (votes_d - votes_n).abs().sum(dim=1)
    assert int(moved.max()) <= 2, "one record moved more than one vote in and one out of a query's neighbours"
    assert bool((moved[: config.release.num_queries] > 0).any()), "the neighbour changes no queried vote"


def _run_pair(
    config: TransferConfig, monkeypatch: pytest.MonkeyPatch, remove: Any, *, neighbour_votes: bool = False
) -> tuple[bool, list[Any]]:
    """Run D, then D′ (``remove()`` applied) in the same folder, and compare what they publish.

    ``neighbour_votes``: the run's aggregator votes with the queries' nearest private records
    (Private-kNN) rather than teachers; the vote check is then :func:`_one_vote_moved`.
    Returns whether the two releases were identical, and the two runs' private diagnostics.
    """
    outcome, diagnostics = [], []
    for neighbour in (False, True):
        if neighbour:
            remove(monkeypatch)
        shutil.rmtree(config.run_dir, ignore_errors=True)
        run_transfer(config)
        votes = _neighbour_votes(config) if neighbour_votes else _teacher_votes(config)
        outcome.append((*_published(config.run_dir), votes))
        diagnostics.append(json.loads((config.run_dir / "private_diagnostics.json").read_text()))
    (raw_d, masked_d, released_d, votes_d), (raw_n, masked_n, released_n, votes_n) = outcome
    assert set(raw_d) == set(raw_n)
    for name in raw_d:
        assert masked_d[name] == masked_n[name], f"{name} differs between neighbouring data sets"
    if released_d == released_n:  # same releases: nothing published may differ at all
        for name in raw_d:
            assert raw_d[name] == raw_n[name], f"{name} differs although the releases are identical"
    assert "files" in json.loads(raw_d["report.json"]), "the report does not say which file is published"
    if neighbour_votes:
        _one_vote_moved(config, votes_d, votes_n)
        return released_d == released_n, diagnostics
    changed = int((votes_d != votes_n).any(dim=1).sum())
    assert changed <= config.teachers_changed, f"{changed} teachers changed their votes for one record removed"
    # the removed record moved a vote on a queried point: a digest of the votes would differ
    assert bool((votes_d != votes_n)[:, : config.release.num_queries].any()), "the neighbour changes no queried vote"
    return released_d == released_n, diagnostics


def _drop_private_record(index: int, subset: tuple[int, int, int] | None = None):
    """A wrapper of ``_raw_splits`` (optionally taking the first rows of each split) that removes
    private record ``index`` once applied."""
    original = run_data._raw_splits

    def install(monkeypatch: pytest.MonkeyPatch, *, drop: bool = True) -> None:
        supplied: list[torch.Tensor] = []

        def splits(config: TransferConfig, generator: torch.Generator):
            (px, py, ux, uy, ex, ey), num_classes = original(config, generator)
            if subset is not None:
                a, b, c = subset
                px, py, ux, uy, ex, ey = px[:a], py[:a], ux[:b], uy[:b], ex[:c], ey[:c]
            ids = torch.arange(px.shape[0], dtype=torch.int64)
            if drop:
                keep = ids != index
                px, py, ids = px[keep], py[keep], ids[keep]
            supplied[:] = [ids]
            return [px, py, ux, uy, ex, ey], num_classes

        monkeypatch.setattr(run_data, "_raw_splits", splits)
        _supply_ids(monkeypatch, lambda: supplied[0])

    return install


def _supply_ids(monkeypatch: pytest.MonkeyPatch, ids: Any) -> None:
    """Record ids supplied with the data, as a user's id column would be: each record keeps its id
    in the neighbouring data set (the bundled loaders supply none, so record-id keys are refused).
    ``ids()`` gives the private split's ids once its rows are loaded."""

    def load_task(config: TransferConfig, *, generator: torch.Generator, data: Any = None) -> run_data.Task:
        task = run_data.load_task(config, generator=generator, data=data)
        if config.release.partition_key != "record_id":
            return task
        return dataclasses.replace(task, private_ids=ids().clone())

    monkeypatch.setattr(run_prepare, "load_task", load_task)


PARTITIONS = [
    pytest.param("content", id="content-keys"),
    pytest.param("record_id", id="record-id-keys"),
]


@pytest.mark.parametrize("aggregator", ["lnmax", "stability"])
@pytest.mark.parametrize("partition_key", PARTITIONS)
def test_synthetic(tmp_path, monkeypatch, partition_key, aggregator):
    config = TransferConfig(
        run_name="nb", checkpoints_dir=str(tmp_path), num_teachers=100, num_private=600, num_public=200,
        num_eval=200, separation=3.0, num_queries=40, aggregator=aggregator, epsilon=20.0, max_unstable=5,
        teacher_epochs=2,
        teacher_lr=0.1, student_epochs=2, accelerator="cpu", releaser_noise="seeded", partition_key=partition_key,
        neighbouring="add_remove",
    )  # fmt: skip
    install = _drop_private_record(index=7)
    install(monkeypatch, drop=False)  # D, with the ids its records are supplied with
    _run_pair(config, monkeypatch, install)


@pytest.mark.parametrize("aggregator", ["private-knn", "confident-private-knn"])
def test_synthetic_private_knn(tmp_path, monkeypatch, aggregator):
    """Private-kNN: the votes are the queries' nearest private records in a fresh Poisson sample (seeded coins)."""
    config = TransferConfig(
        run_name="nb", checkpoints_dir=str(tmp_path), num_teachers=20, num_private=600, num_public=200,
        num_eval=200, separation=3.0, num_queries=40, aggregator=aggregator, epsilon=20.0, knn_sampling_rate=0.5,
        student_epochs=2, accelerator="cpu", releaser_noise="seeded", neighbouring="add_remove",
    )  # fmt: skip
    install = _drop_private_record(index=7)
    install(monkeypatch, drop=False)
    _run_pair(config, monkeypatch, install, neighbour_votes=True)


def test_synthetic_with_the_student_chosen_by_cross_validation(tmp_path, monkeypatch):
    config = TransferConfig(
        run_name="nb", checkpoints_dir=str(tmp_path), num_teachers=100, num_private=600, num_public=200,
        num_eval=200, separation=3.0, num_queries=40, aggregator="lnmax", epsilon=20.0, teacher_epochs=2,
        teacher_lr=0.1, student_epochs=2, student_method="spread", student_select="cv", accelerator="cpu",
        releaser_noise="seeded", neighbouring="add_remove",
    )  # fmt: skip
    install = _drop_private_record(index=7)
    install(monkeypatch, drop=False)
    _run_pair(config, monkeypatch, install)
    selection = json.loads((config.run_dir / "report.json").read_text())["student"]["selection"]
    assert selection["method"] == "cv" and "skipped" not in selection


def test_synthetic_gnmax_seeded_sanitised_figure_stays_private(tmp_path, monkeypatch):
    """Seeded GNMax: PATE's sanitised data-dependent ε is sanitised with noise from the published
    seed, so it would reveal the raw figure; with identical labels nothing published may differ."""
    config = TransferConfig(
        run_name="nb", checkpoints_dir=str(tmp_path), num_teachers=100, num_private=600, num_public=200,
        num_eval=200, separation=3.0, num_queries=40, aggregator="gnmax", epsilon=8.0, teacher_epochs=2,
        teacher_lr=0.1, student_epochs=2, accelerator="cpu", releaser_noise="seeded", neighbouring="add_remove",
        dd_order=5.0,  # PATE 2018's conditions C5-C6 hold at this order and σ: the figure is sanitised
    )  # fmt: skip
    install = _drop_private_record(index=7)
    install(monkeypatch, drop=False)
    same_release, (private_d, private_n) = _run_pair(config, monkeypatch, install)
    assert same_release, "the pair must release identical labels for this check"
    # the figure exists and depends on the changed teacher: it is in the private diagnostics only
    sanitised = [p["data_dependent"]["epsilon_dd_sanitised"] for p in (private_d, private_n)]
    assert None not in sanitised and sanitised[0] != sanitised[1]
    report = json.loads((config.run_dir / "report.json").read_text())
    assert report["data_dependent"]["epsilon_dd_sanitised"] is None
    assert "published seed" in report["data_dependent"]["data_dependent_note"]


@pytest.mark.accelerator
@pytest.mark.parametrize("partition_key", PARTITIONS)
def test_mnist_with_cached_scattering_features(tmp_path, monkeypatch, partition_key):
    if not (DATA / "mnist" / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("MNIST idx files not found in ../shared/data/mnist")
    subset = (400, 150, 100)  # private, public pool, evaluation
    install = _drop_private_record(index=3, subset=subset)  # a record whose removal moves queried votes
    install(monkeypatch, drop=False)  # D: the subset itself
    config = TransferConfig(
        run_name="nb", checkpoints_dir=str(tmp_path), dataset="mnist", data_dir=str(DATA / "mnist"),
        features="scattering", pca_dim=20, teacher_model="propagate", graph_pca_dim=None, num_teachers=20,
        graph_neighbors=5, graph_power=1.0,  # a sparse graph: the removed record moves queried votes
        num_queries=120, aggregator="lnmax", epsilon=20.0, student_model="logistic", student_epochs=2,
        accelerator="cpu", releaser_noise="seeded", partition_key=partition_key,
    )  # fmt: skip
    _run_pair(config, monkeypatch, install)
    report = json.loads((config.run_dir / "report.json").read_text())
    assert report["features"]["cache"].startswith("features/scattering_")  # the cache was used and is named


def _adult_files(folder: Path, rows: int, test_rows: int, drop: int | None) -> None:
    """The first ``rows`` rows of adult.data (less row ``drop``) and ``test_rows`` of adult.test."""
    folder.mkdir(parents=True, exist_ok=True)
    data = (DATA / "adult" / "adult.data").read_text().splitlines()[:rows]
    if drop is not None:
        data = data[:drop] + data[drop + 1 :]
    (folder / "adult.data").write_text("\n".join(data) + "\n")
    test = (DATA / "adult" / "adult.test").read_text().splitlines()[: test_rows + 1]  # + its first comment line
    (folder / "adult.test").write_text("\n".join(test) + "\n")


def _rarest_row(rows: int, test_rows: int) -> int:
    """The private row holding the rarest category value over both files (it may be the only one)."""
    lines = (DATA / "adult" / "adult.data").read_text().splitlines()[:rows]
    test = (DATA / "adult" / "adult.test").read_text().splitlines()[1 : test_rows + 1]
    parsed = [[v.strip() for v in r] for r in csv.reader(lines + test) if len(r) == 15]
    counts = Counter((i, r[i]) for r in parsed for i in (1, 3, 5, 6, 7, 8, 9, 13))
    rarity = [min(counts[(i, r[i])] for i in (1, 3, 5, 6, 7, 8, 9, 13)) for r in parsed[:rows]]
    return min(range(len(rarity)), key=rarity.__getitem__)


@pytest.mark.parametrize(
    "partition_key",
    [
        pytest.param("content", id="content-keys"),
        pytest.param("record_id", id="record-id-keys"),
    ],
)
def test_adult(tmp_path, monkeypatch, partition_key):
    if not (DATA / "adult" / "adult.data").is_file():
        pytest.skip("UCI Adult not found in ../shared/data/adult")
    rows, test_rows = 1500, 600
    drop = _rarest_row(rows, test_rows)
    folder = tmp_path / "adult"
    _adult_files(folder, rows, test_rows, drop=None)
    config = TransferConfig(
        run_name="nb", checkpoints_dir=str(tmp_path / "ck"), dataset="adult", data_dir=str(folder),
        num_teachers=20, num_queries=30, aggregator="lnmax", epsilon=20.0, teacher_epochs=2, teacher_lr=0.1,
        student_model="logistic", student_epochs=2, accelerator="cpu", releaser_noise="seeded",
        partition_key=partition_key,
    )  # fmt: skip

    ids = torch.arange(rows, dtype=torch.int64)  # each row's id in the full file
    _supply_ids(monkeypatch, lambda: ids)

    def remove(mp: pytest.MonkeyPatch) -> None:
        _adult_files(folder, rows, test_rows, drop=drop)
        _supply_ids(mp, lambda: ids[ids != drop])

    _run_pair(config, monkeypatch, remove)


OWN_SCHEMA = {
    "columns": [
        {"name": "x1", "kind": "numeric", "bounds": [-20, 20]},
        {"name": "x2", "kind": "numeric", "bounds": [-20, 20]},
        {"name": "colour", "kind": "categorical", "categories": ["red", "green"]},
    ],
    "label": "label",
    "classes": ["low", "mid", "high"],
    "id_column": "rid",
    "unlisted": "other",  # 'blue' (in the files, not declared) takes the column's <other> slot
}


def _own_csv(path: Path, x: torch.Tensor, y: torch.Tensor, ids: torch.Tensor | None, drop: int | None = None) -> None:
    """A CSV as a user would bring it: an id column (private set), two numbers, a colour that
    follows the class ("blue", undeclared by the schema, falls into its other slot), the label."""
    lines = [",".join((["rid"] if ids is not None else []) + ["x1", "x2", "colour", "label"])]
    for i in range(x.shape[0]):
        if i == drop:
            continue
        cells = [f"{float(x[i, 0]):.4f}", f"{float(x[i, 1]):.4f}", ["red", "green", "blue"][int(y[i])]]
        if ids is not None:
            cells = [str(int(ids[i])), *cells]
        lines.append(",".join([*cells, ["low", "mid", "high"][int(y[i])]]))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("partition_key", PARTITIONS)
def test_own_csv_with_an_id_column(tmp_path, monkeypatch, partition_key):
    from pate_stab.data import make_gaussian_mixture
    from pate_stab.rng import seeded_generator

    x, y = make_gaussian_mixture(1000, num_classes=3, dim=2, separation=1.0, generator=seeded_generator(5))
    ids = torch.randperm(10**6, generator=seeded_generator(6))[:600]  # the user's ids: not row numbers
    folder = tmp_path / "own"
    folder.mkdir()
    (folder / "schema.json").write_text(json.dumps(OWN_SCHEMA))
    _own_csv(folder / "private.csv", x[:600], y[:600], ids)
    pool = [",".join(["x1", "x2", "colour"])] + [
        f"{float(x[i, 0]):.4f},{float(x[i, 1]):.4f},{['red', 'green', 'blue'][int(y[i])]}" for i in range(600, 800)
    ]
    (folder / "pool.csv").write_text("\n".join(pool) + "\n")  # the public pool: no labels, no ids
    _own_csv(folder / "eval.csv", x[800:], y[800:], None)
    config = TransferConfig(
        run_name="nb", checkpoints_dir=str(tmp_path / "ck"), dataset="files", private=str(folder / "private.csv"),
        public=str(folder / "pool.csv"), evaluation=str(folder / "eval.csv"), schema=str(folder / "schema.json"),
        num_teachers=100, num_queries=150, aggregator="lnmax", epsilon=20.0, teacher_epochs=2, teacher_lr=0.1,
        student_epochs=2, accelerator="cpu", releaser_noise="seeded", partition_key=partition_key,
        neighbouring="add_remove",
    )  # fmt: skip

    def remove(mp: pytest.MonkeyPatch) -> None:  # D′: the private file without row 7 (its id leaves with it)
        _own_csv(folder / "private.csv", x[:600], y[:600], ids, drop=7)

    _run_pair(config, monkeypatch, remove)
    diagnostics = json.loads((config.run_dir / "private_diagnostics.json").read_text())
    assert diagnostics["sizes"]["private"] == 599  # the private size is in the private file only
    report = json.loads((config.run_dir / "report.json").read_text())
    assert "private" not in report["sizes"] and report["classes"] == ["low", "mid", "high"]


# report.json fields of `release --votes` computed from the released outputs
RELEASE_REPORT_RELEASED = (("queries",), *((("summary", key),) for key in SUMMARY_RELEASED))


def _published_release(out: Path) -> tuple[dict[str, bytes], dict[str, Any], np.ndarray]:
    """(raw bytes of every published file of a `release --votes` folder, the same masked, the labels)."""
    report = json.loads((out / "report.json").read_text())
    files = report["files"]
    listed = set(files["published"]) | set(files["private"])
    present = {p.name for p in out.iterdir()}
    assert present <= listed, f"files neither published nor private: {sorted(present - listed)}"
    raw, masked = {}, {}
    for name in files["published"]:
        data = (out / name).read_bytes()
        raw[name] = data
        if name == "report.json":
            view = json.loads(data)
            for path in RELEASE_REPORT_RELEASED:
                _mask(view, path)
            masked[name] = view
        elif name == "ledger.jsonl":
            masked[name] = [_masked_ledger_line(json.loads(line)) for line in data.decode().splitlines()]
        elif name in ("labels.npy", "labels.csv"):
            masked[name] = RELEASED
        else:
            masked[name] = data
    return raw, masked, np.load(out / "labels.npy")


@pytest.mark.parametrize("aggregator", ["gnmax", "lnmax", "confident-gnmax"])
def test_release_votes_with_and_without_a_declared_class_count(tmp_path, capsys, aggregator):
    """60 teachers × 40 queries over classes 0–8; in D teacher 17 casts the only vote for class 9 (on
    query 5), in D′ it votes 8. Declared C = 10: identical published files but for the released
    outputs, labels of one shape in [0, 10) ∪ {−1} on both sides, and (seeded noise of shape m × C,
    the same seed) the same label on every query whose votes did not move. Undeclared: exit 2 and
    no ledger."""
    rng = np.random.default_rng(3)
    votes_d = rng.integers(0, 9, (60, 40))
    votes_d[17, 5] = 9
    votes_n = votes_d.copy()
    votes_n[17, 5] = 8
    path, out = tmp_path / "votes.npy", tmp_path / "release"
    args = ["release", "--votes", str(path), "--out", str(out), "--aggregator", aggregator, "--epsilon", "8",
            "--noise", "seeded", "--seed", "0", "--confident-threshold", "0.1"]  # fmt: skip
    outcome = []
    for votes in (votes_d, votes_n):
        np.save(path, votes)
        shutil.rmtree(out, ignore_errors=True)
        with pytest.raises(SystemExit) as info:  # no declared class count: refused, nothing opened
            main(args)
        assert info.value.code == 2 and "declare the number of classes" in capsys.readouterr().err
        assert not (out / "ledger.jsonl").exists()
        assert main([*args, "--num-classes", "10"]) == 0
        assert json.loads((out / "report.json").read_text())["votes"]["num_classes"] == 10
        outcome.append(_published_release(out))
    (raw_d, masked_d, labels_d), (raw_n, masked_n, labels_n) = outcome
    assert set(raw_d) == set(raw_n)
    for name in raw_d:
        assert masked_d[name] == masked_n[name], f"{name} differs between neighbouring votes"
    assert labels_d.shape == labels_n.shape == (40,) and labels_d.dtype == labels_n.dtype
    for labels in (labels_d, labels_n):
        assert bool(((labels >= -1) & (labels < 10)).all())
    moved = (votes_d != votes_n).any(axis=0)
    assert np.array_equal(labels_d[~moved], labels_n[~moved])
    if np.array_equal(labels_d, labels_n):
        for name in raw_d:
            assert raw_d[name] == raw_n[name], f"{name} differs although the releases are identical"
    # a refused rerun on the folder's existing ledger leaves it as it was
    ledger = (out / "ledger.jsonl").read_bytes()
    with pytest.raises(SystemExit):
        main(args)
    assert (out / "ledger.jsonl").read_bytes() == ledger


# compare.json fields of an aggregator row computed from its released labels (query_selection "first":
# the offered points and the selection rounds are fixed in advance, not outputs)
COMPARE_RELEASED = ("seen", "answered", "label_acc", "label_acc_all", "student_trained_on", "student_acc",
                    "student_acc_unlabelled_pool", "unlabelled_pool_size", "student_selection")  # fmt: skip
# the sentence a row at or below the majority-class reference gets in its note (pate_stab.run.compare_table.flag_rows)
MAJORITY_SENTENCE = re.compile(r"^No better than .*?: this model has learnt nothing usable\.\s*")
# a direct learner's row: its model is the output, its accuracies are computed from it
COMPARE_DIRECT_RELEASED = ("student_acc", "student_acc_unlabelled_pool")
# compare.json's summary over repeats: mean, spread and range of the rows' released figures
COMPARE_SUMMARY_RELEASED = tuple(
    key + suffix
    for key in ("answered", "label_acc", "student_acc", "student_acc_unlabelled_pool")
    for suffix in ("", "_sd", "_min", "_max")
)


def _released_by_spend(run_dir: Path) -> dict[str, Any]:
    """Each spend's released output: a release's labels and selection, a direct learner's model digest."""
    out = {}
    for record in map(json.loads, (run_dir / "ledger.jsonl").read_text().splitlines()):
        if record["kind"] == "result":
            payload = record["payload"]
            out[record["spend_id"]] = payload.get("sha256") if "model" in payload else (
                payload["labels"], payload.get("selection"))  # fmt: skip
    return out


def _published_compare(config: TransferConfig, direct: list[str]) -> tuple[dict[str, Any], ...]:
    """(raw published files, the same with released outputs masked, the released outputs by spend id) of
    a compare run folder. compare.txt and compare.png must be what compare.json's rows give (the table and
    plot functions read published rows only): they are checked against a rebuild and then stand for it."""
    from pate_stab.run.compare import compare_title, format_rows, plot_rows, total_cost_line
    from pate_stab.run.direct import direct_legend

    run_dir = config.run_dir
    report = json.loads((run_dir / "compare.json").read_text())
    files = report["files"]
    listed = {name.rstrip("/") for name in files["published"] + files["private"]}
    present = {p.name for p in run_dir.iterdir()}
    assert present <= listed, f"files neither published nor private: {sorted(present - listed)}"
    assert {"compare.json", "compare.txt", "compare.png", "ledger.jsonl", "config.json", "direct/"} <= set(
        files["published"]
    )
    rows, relation, reference = report["rows"], report["ledger"]["neighbouring"], report["reference"]
    table = (
        format_rows(rows, run_neighbouring=relation, reference=reference)
        + "\n"
        + direct_legend(rows, run_neighbouring=relation, reference=reference)
    )
    assert (run_dir / "compare.txt").read_text() == table + "\n", "compare.txt is not computed from compare.json"
    rebuilt = plot_rows(rows, run_dir.parent / "rebuilt.png", title=compare_title(config),
                        caption=total_cost_line(rows, run_neighbouring=relation), majority=reference)  # fmt: skip
    assert rebuilt.read_bytes() == (run_dir / "compare.png").read_bytes(), "compare.png is not drawn from compare.json"
    raw: dict[str, Any] = {}
    masked: dict[str, Any] = {}
    for name in files["published"]:
        path = run_dir / name.rstrip("/")
        if path.is_dir():  # direct/: one model per direct spend, the mechanism's output
            models = {p.name: p.read_bytes() for p in sorted(path.iterdir())}
            raw[name] = models
            masked[name] = sorted(models)
            continue
        raw[name] = data = path.read_bytes()
        if name == "compare.json":
            view = json.loads(data)
            for row in view["rows"]:
                for key in COMPARE_DIRECT_RELEASED if row.get("kind") == "direct" else COMPARE_RELEASED:
                    row[key] = RELEASED
                # the majority-class flag and its sentence are computed from the row's student accuracy
                row[AT_OR_BELOW] = RELEASED
                if row.get("note"):
                    row["note"] = MAJORITY_SENTENCE.sub("", row["note"])
            for row in view["summary"]:
                for key in COMPARE_SUMMARY_RELEASED:
                    row[key] = RELEASED
            masked[name] = view
        elif name == "ledger.jsonl":
            masked[name] = [_masked_ledger_line(json.loads(line)) for line in data.decode().splitlines()]
        elif name in ("compare.txt", "compare.png"):
            masked[name] = RELEASED  # rebuilt above from compare.json's rows: checked through them
        else:
            masked[name] = data
    # the models in direct/ are the ones the ledger recorded (name and digest), of the learners asked
    recorded = {r["payload"]["model"]: r["payload"]["sha256"] for r in map(json.loads, raw["ledger.jsonl"].splitlines())
                if r["kind"] == "result" and "model" in r["payload"]}  # fmt: skip
    assert {name: hashlib.sha256(b).hexdigest() for name, b in raw["direct/"].items()} == recorded
    assert len(recorded) == len(direct)
    return raw, masked, _released_by_spend(run_dir)


def _mentions(text: str, number: int) -> bool:
    """``number`` as a number of its own in ``text`` (not part of a longer number, a decimal or a digest)."""
    return re.search(rf"(?<![\w.]){number}(?![\w.])", text) is not None


def _spend_lines_unmasked(ledger: bytes, spend_id: str) -> list[dict[str, Any]]:
    """A spend's ledger lines without the digest chain (which covers every earlier line)."""
    lines = [json.loads(line) for line in ledger.decode().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("sha256", "prev")} for r in lines if r.get("spend_id") == spend_id]


def _record_direct_calibration(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Record what the direct learners' mechanisms are calibrated on, call by call: DP-SGD's (ε, δ, public
    size, settings) and the softmax head's (ε, C, λ'·n), which is λN in the (1/n)-normalised solver
    (:mod:`pate_stab.direct.learners`); calibrated on the private count n it would differ between D and D′."""
    import pate_stab.direct.learners as run_direct

    seen: list[tuple[Any, ...]] = []
    dpsgd, head = run_direct.train_dpsgd_linear, run_direct.softmax_output_perturbation

    def dpsgd_spy(x: Any, y: Any, **kwargs: Any) -> Any:
        seen.append(("dpsgd", kwargs["epsilon"], kwargs["delta"], kwargs["public_size"], kwargs["config"]))
        return dpsgd(x, y, **kwargs)

    def head_spy(x: Any, y: Any, **kwargs: Any) -> Any:
        seen.append(("head", kwargs["epsilon"], kwargs["num_classes"], float(f"{kwargs['lam'] * x.shape[0]:.12g}")))
        return head(x, y, **kwargs)

    monkeypatch.setattr(run_direct, "train_dpsgd_linear", dpsgd_spy)
    monkeypatch.setattr(run_direct, "softmax_output_perturbation", head_spy)
    return seen


def test_compare_with_mixed_learners(tmp_path, monkeypatch):
    """compare with PATE's LNMax and GNMax, the stability releaser and two direct learners (DP-SGD and an
    output-perturbation head, both calibrated on the public size ``private_size_hint``) on D (593 private
    records; num_private = 600 is the generator's setting) and D minus record 7, in one add/remove ledger.

    Published may differ only in the aggregator rows' released labels and what they give (counts, label and
    student accuracies), the direct learners' models and their accuracies, and those outputs in the ledger;
    every setting, ε, δ, relation, calibration size, note and spend line is identical. A row (and its
    ledger lines) whose released output is the same on both sides is identical in full. One relation in the
    ledger; neither private count appears in a published file, and the direct mechanisms were calibrated on
    the same figures (the public size) on both sides."""
    from pate_stab.direct.dpsgd import SmallPrivateSetWarning
    from pate_stab.run.compare import run_compare

    sizes = (593, 592)  # D, D′: the private counts, private under add/remove
    direct = ["dpsgd-linear", "output-softmax"]
    config = TransferConfig(
        run_name="nb", checkpoints_dir=str(tmp_path), num_teachers=100, num_private=600, num_public=200,
        num_eval=200, separation=3.0, num_queries=40, epsilon=2.0, max_unstable=1, teacher_model="propagate",
        graph_pca_dim=None, student_epochs=2, accelerator="cpu", releaser_noise="seeded", neighbouring="add_remove",
        private_size_hint=10000,  # DP-SGD's public size N ≥ its expected batch 8192; the heads' N too
    )  # fmt: skip
    install = _drop_private_record(index=7, subset=(sizes[0], 200, 200))
    install(monkeypatch, drop=False)
    calibration = _record_direct_calibration(monkeypatch)
    outcome = []
    for neighbour in (False, True):
        if neighbour:
            install(monkeypatch)
        shutil.rmtree(config.run_dir, ignore_errors=True)
        with pytest.warns(SmallPrivateSetWarning):  # n ≪ N: said on the user's terminal, never published
            out = run_compare(config, epsilons=[2.0], aggregators=["lnmax", "gnmax", "stability"], direct=direct)
        assert out["private"]["sizes"]["private"] == sizes[neighbour]  # the data set the run saw
        outcome.append((*_published_compare(config, direct), _teacher_votes(config)))
        private = (config.run_dir / "private_compare.json").read_text()
        assert _mentions(private, sizes[neighbour])  # the count is kept where it belongs
        for name in ("compare.json", "compare.txt", "ledger.jsonl", "config.json"):
            for n in sizes:
                assert not _mentions(outcome[-1][0][name].decode(), n), f"private count {n} in {name}"
        # one relation per ledger: every spend states the header's
        lines = [json.loads(line) for line in outcome[-1][0]["ledger.jsonl"].splitlines()]
        assert lines[0]["kind"] == "header" and lines[0]["neighbouring"] == "add_remove"
        spends = [r for r in lines if r["kind"] == "spend"]
        assert len(spends) == 5 and {r["relation"] for r in spends} == {"add_remove"}
    (raw_d, masked_d, released_d, votes_d), (raw_n, masked_n, released_n, votes_n) = outcome
    assert set(raw_d) == set(raw_n)
    for name in raw_d:
        assert masked_d[name] == masked_n[name], f"{name} differs between neighbouring data sets"
    # what the direct mechanisms were calibrated on, inside (their noise is in the masked models): the same
    assert len(calibration) == 4 and calibration[:2] == calibration[2:], (
        f"calibrated on the private data: {calibration}"
    )
    # a row whose release is the same on both sides: identical in full, and so are its ledger lines
    rows_d, rows_n = (json.loads(raw["compare.json"])["rows"] for raw in (raw_d, raw_n))
    assert released_d.keys() == released_n.keys() == {r["spend_id"] for r in rows_d}
    same = [r["spend_id"] for r in rows_d if released_d[r["spend_id"]] == released_n[r["spend_id"]]]
    assert same, "no row released the same output on both sides: the check below would check nothing"
    for row_d, row_n in zip(rows_d, rows_n, strict=True):
        if row_d["spend_id"] in same:
            assert row_d == row_n, f"row {row_d['spend_id']} differs although its release is identical"
            for raw in (raw_d, raw_n):
                assert _spend_lines_unmasked(raw["ledger.jsonl"], row_d["spend_id"])
            assert _spend_lines_unmasked(raw_d["ledger.jsonl"], row_d["spend_id"]) == _spend_lines_unmasked(
                raw_n["ledger.jsonl"], row_d["spend_id"]
            )
    changed = int((votes_d != votes_n).any(dim=1).sum())
    assert changed <= config.teachers_changed, f"{changed} teachers changed their votes for one record removed"
    assert bool((votes_d != votes_n)[:, : config.release.num_queries].any()), "the neighbour changes no queried vote"

"""Label privacy (DESIGN.md fact 13; docs/label_privacy.md): the unit in the configuration, the
teachers under it (one changed label moves at most one teacher; a changed input may move many, so
it is not a label neighbour), queries over the private inputs, and no ranking of two units together."""

from __future__ import annotations

import json
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.data import make_gaussian_mixture
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.compare import run_compare
from pate_stab.run.compare_table import (
    LABEL_PRIVATE_LEARNERS,
    MixedUnitsError,
    best_per_epsilon,
    check_learner_units,
    format_rows,
    summarise_rows,
)
from pate_stab.run.data import Task
from pate_stab.run.prepare import label_query_task, partition_keys
from pate_stab.teachers import PropagationSpec, PropagationTeachers, partition_indices

N_PRIVATE, N_PUBLIC, K, C = 240, 80, 12, 3


def _task(seed: int = 0) -> Task:
    x, y = make_gaussian_mixture(N_PRIVATE + N_PUBLIC + 20, num_classes=C, dim=5, separation=2.0,
                                 generator=torch.Generator().manual_seed(seed))  # fmt: skip
    a, b = N_PRIVATE, N_PRIVATE + N_PUBLIC
    return Task(x[:a], y[:a], x[a:b], y[a:b], x[b:], y[b:], C, "public-pool")


def _label_teachers(task: Task, unit: str = "label") -> PropagationTeachers:
    """The label-privacy propagation teachers as prepare builds them: shards keyed on the inputs,
    the graph over the private and public inputs."""
    shards = partition_indices(partition_keys(task, "content", privacy_unit=unit), K,
                               generator=torch.Generator().manual_seed(1))  # fmt: skip
    nodes = torch.cat([task.private_x, task.public_x])
    spec = PropagationSpec(num_neighbors=8, power=1.0, steps=5)
    return PropagationTeachers(nodes, task.private_x, task.private_y, shards, num_classes=C, spec=spec)


def _queries(task: Task) -> torch.Tensor:
    return torch.cat([task.private_x, task.public_x])  # label_queries "both": every input is asked about


@settings(max_examples=25, deadline=None)
@given(record=st.integers(0, N_PRIVATE - 1), shift=st.integers(1, C - 1))
def test_one_changed_label_moves_at_most_one_teacher(record, shift):
    task = _task()
    neighbour = Task(**{**task.__dict__, "private_y": task.private_y.clone()})
    neighbour.private_y[record] = (neighbour.private_y[record] + shift) % C
    d, n = _label_teachers(task), _label_teachers(neighbour)
    scores_d, scores_n = d.predict_scores(_queries(task)), n.predict_scores(_queries(task))
    moved = (scores_d != scores_n).flatten(1).any(dim=1)  # (k,) teachers whose scores on any query changed
    assert int(moved.sum()) <= 1
    assert bool(moved.any()), "the changed label must reach its own teacher (else the check is empty)"
    # the shards themselves are unchanged: a content key under label privacy is the inputs alone
    assert torch.equal(d.shard_of, n.shard_of)


def test_a_content_key_under_record_privacy_moves_a_relabelled_record():
    """The contrast: record keys hash the label too, so a relabelled record may land in another shard."""
    task = _task()
    moved = 0
    for record in range(40):
        neighbour = Task(**{**task.__dict__, "private_y": task.private_y.clone()})
        neighbour.private_y[record] = (neighbour.private_y[record] + 1) % C
        keys_d = partition_keys(task, "content", privacy_unit="record")
        keys_n = partition_keys(neighbour, "content", privacy_unit="record")
        shard = [partition_indices(k, K, generator=torch.Generator().manual_seed(1)) for k in (keys_d, keys_n)]
        moved += not all(torch.equal(a, b) for a, b in zip(*shard, strict=True))
    assert moved > 0


def test_a_changed_private_input_may_move_many_teachers():
    """Under label privacy the inputs are public: the graph spans them, so one changed *input* changes
    the graph and with it many teachers' scores. That is allowed because such a pair is not a label
    neighbour; the guarantee covers changed labels only."""
    task = _task()
    neighbour = Task(**{**task.__dict__, "private_x": task.private_x.clone()})
    neighbour.private_x[5] = task.public_x[0] + 0.01  # one private input moved next to a public one
    d, n = _label_teachers(task), _label_teachers(neighbour)
    moved = (d.predict_scores(task.public_x) != n.predict_scores(task.public_x)).flatten(1).any(dim=1)
    assert int(moved.sum()) > 1


def test_the_configuration_states_the_unit_and_refuses_private_queries_under_record_privacy():
    config = TransferConfig(privacy_unit="label", neighbouring="replace_one", label_queries="both")
    assert config.release.neighbouring == "replace_one" and config.teachers_changed == 1
    relation = config.privacy_relation()
    assert relation["privacy_unit"] == "label" and relation["label_queries"] == "both"
    assert TransferConfig().privacy_relation()["privacy_unit"] == "record"
    with pytest.raises(ValueError, match="record privacy protects"):
        TransferConfig(label_queries="private")
    with pytest.raises(ValueError, match="set neighbouring: replace_one"):  # a label is replaced, never added
        TransferConfig(privacy_unit="label")
    with pytest.raises(ValueError, match="privacy_unit must be one of"):
        TransferConfig(privacy_unit="person")
    with pytest.raises(ValueError, match="label_queries must be one of"):
        TransferConfig(privacy_unit="label", neighbouring="replace_one", label_queries="all")


def test_queries_over_the_private_inputs_keep_their_labels_private():
    task = _task()
    both = label_query_task(task, "both")
    assert torch.equal(both.public_x, torch.cat([task.private_x, task.public_x]))
    assert both.public_y is None  # no published label accuracy on private labels
    assert torch.equal(both.pool_labels_private, torch.cat([task.private_y, task.public_y]))
    private = label_query_task(task, "private")
    assert torch.equal(private.public_x, task.private_x) and private.public_y is None
    assert label_query_task(task, "pool") is task


def test_a_label_run_asks_about_private_inputs_and_states_its_unit(tmp_path):
    config = TransferConfig(
        run_name="lab", checkpoints_dir=str(tmp_path), privacy_unit="label", neighbouring="replace_one",
        label_queries="private",
        teacher_model="propagate", num_private=600, num_public=100, num_eval=200, num_teachers=30, num_queries=500,
        aggregator="gnmax", epsilon=8.0, student_epochs=2, accelerator="cpu", releaser_noise="seeded",
    )  # fmt: skip
    report = run_transfer(config)
    assert report["privacy"]["privacy_unit"] == "label" and report["ledger"]["privacy_unit"] == "label"
    assert report["queries"]["seen"] == 500  # more queries than the 100-point public pool holds
    assert report["label_accuracy_answered"] is None  # the queries' true labels are private
    private = json.loads((config.run_dir / "private_diagnostics.json").read_text())
    assert private["label_accuracy_private"]["answered"] > 0.5
    header = json.loads((config.run_dir / "ledger.jsonl").read_text().splitlines()[0])
    assert header["privacy_unit"] == "label"


def _row(agg, unit, acc):
    return {"aggregator": agg, "privacy_unit": unit, "target_epsilon": 2.0, "epsilon": 2.0, "delta": 1e-5,
            "student_acc": acc}  # fmt: skip


def test_rows_of_two_units_are_never_ranked_together():
    rows = [_row("stability", "label", 0.9), _row("gnmax", "record", 0.8)]
    with pytest.raises(MixedUnitsError, match="label and record in one ranking"):
        best_per_epsilon(rows)
    assert best_per_epsilon(rows[:1]) == {2.0: (0.9, "stability")}
    table = format_rows(rows)
    assert table.splitlines()[0].split()[:2] == ["aggregator", "unit"]
    assert re.search(r"^stability +label ", table, re.M) and re.search(r"^gnmax +record ", table, re.M)
    assert {(r["privacy_unit"], r["aggregator"]) for r in summarise_rows(rows)} == {
        ("label", "stability"), ("record", "gnmax")}  # fmt: skip


def test_a_compare_that_would_rank_a_label_learner_under_record_privacy_is_refused(tmp_path, monkeypatch):
    extended = {*LABEL_PRIVATE_LEARNERS, "output-softmax"}
    monkeypatch.setattr("pate_stab.run.compare_table.LABEL_PRIVATE_LEARNERS", extended)
    with pytest.raises(MixedUnitsError, match="label-private"):
        check_learner_units("record", ["dpsgd-linear", "output-softmax"])
    check_learner_units("label", ["dpsgd-linear", "output-softmax"])  # record rows count in a label run
    config = TransferConfig(run_name="mix", checkpoints_dir=str(tmp_path), num_teachers=10, num_private=200)
    with pytest.raises(MixedUnitsError, match="privacy_unit: label"):
        run_compare(config, epsilons=[1.0], aggregators=["gnmax"], direct=["output-softmax"])
    assert not (tmp_path / "mix").exists()  # refused before anything was read, trained or written


def test_the_api_and_the_command_line_take_the_unit(tmp_path):
    from pate_stab import Data, transfer
    from pate_stab.cli.commands import build_parser

    x, y = make_gaussian_mixture(900, num_classes=C, dim=5, separation=3.0, generator=torch.Generator().manual_seed(0))
    result = transfer(
        Data.arrays((x[:600], y[:600]), x[600:800], (x[800:], y[800:]), classes=C), privacy_unit="label",
        neighbouring="replace_one", label_queries="both",
        run_name="api", checkpoints_dir=str(tmp_path), num_teachers=20, num_queries=300, aggregator="gnmax",
        epsilon=8.0, student_epochs=2, accelerator="cpu", releaser_noise="seeded",
    )  # fmt: skip
    assert result.report["privacy"]["privacy_unit"] == "label" and result.report["queries"]["seen"] == 300
    args = build_parser().parse_args(
        ["transfer", "--privacy-unit", "label", "--neighbouring", "replace_one", "--label-queries", "private"]
    )
    assert (args.privacy_unit, args.label_queries) == ("label", "private")
    args = build_parser().parse_args(["release", "--votes", "v.npy", "--aggregator", "gnmax", "--epsilon", "1",
                                      "--privacy-unit", "label"])  # fmt: skip
    assert args.privacy_unit == "label" and args.neighbouring is None


def test_release_votes_states_the_unit_and_keeps_one_unit_per_folder(tmp_path):
    import numpy as np

    from pate_stab.errors import LabelRelationError, LedgerError
    from pate_stab.run.release_votes import release_votes

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 10, 50)
    np.save(tmp_path / "votes.npy", np.where(rng.random((300, 50)) < 0.9, truth, rng.integers(0, 10, (300, 50))))
    common = {"aggregator": "gnmax", "epsilon": 8.0, "delta": 1e-5, "num_classes": 10}
    label = {"privacy_unit": "label", "neighbouring": "replace_one"}
    report = release_votes(tmp_path / "votes.npy", out_dir=tmp_path / "out", **label, **common)
    assert report["privacy"]["privacy_unit"] == "label" and report["privacy"]["neighbouring"] == "replace_one"
    assert report["ledger"]["privacy_unit"] == "label"
    with pytest.raises(LabelRelationError, match="set neighbouring: replace_one .* got neighbouring='add_remove'"):
        release_votes(tmp_path / "votes.npy", out_dir=tmp_path / "x", privacy_unit="label",
                      neighbouring="add_remove", **common)  # fmt: skip
    with pytest.raises(LedgerError, match="privacy_unit='label'"):  # the folder's ledger is a label ledger
        release_votes(tmp_path / "votes.npy", out_dir=tmp_path / "out", neighbouring="replace_one",
                      **{**common, "epsilon": 4.0})  # fmt: skip


def _self_training_config(tmp_path, name: str, **changes) -> TransferConfig:
    settings = dict(
        run_name=name, checkpoints_dir=str(tmp_path), privacy_unit="label", neighbouring="replace_one",
        teacher_model="logistic", num_private=300, num_public=100, num_eval=100, num_teachers=6, num_queries=40,
        aggregator="gnmax", epsilon=8.0, student_epochs=1, accelerator="cpu", releaser_noise="seeded",
        teacher_epochs=2, teacher_self_training_rounds=1, teacher_self_training_threshold=0.6,
    )  # fmt: skip
    return TransferConfig(**(settings | changes))


def test_a_run_self_trains_its_heads_on_every_input_under_label_privacy(tmp_path):
    config = _self_training_config(tmp_path, "self")
    assert config.teachers.teacher_self_training_rounds == 1
    run_transfer(config)
    history_path = config.run_dir / "private_self_training.json"
    assert history_path.stat().st_mode & 0o777 == 0o600  # pseudo-label counts depend on the private labels
    history = json.loads(history_path.read_text())
    assert [h["round"] for h in history] == [1] and len(history[0]["pseudo_labels"]) == 6
    assert sum(history[0]["pseudo_labels"]) > 0  # the heads did label the other inputs
    assert "pseudo_labels" not in (config.run_dir / "report.json").read_text()
    plain = _self_training_config(tmp_path, "plain", teacher_self_training_rounds=0)
    run_transfer(plain)
    trained = torch.load(config.run_dir / "teachers" / "weights.pt")["params"]
    untrained = torch.load(plain.run_dir / "teachers" / "weights.pt")["params"]
    assert set(trained) == set(untrained) and any(not torch.equal(trained[k], untrained[k]) for k in trained)
    meta = json.loads((config.run_dir / "teachers" / "config.json").read_text())
    assert meta["config"]["self_training"] == {"round": 1, "threshold": 0.6}


def test_self_training_is_refused_under_record_privacy_and_for_other_teachers(tmp_path):
    with pytest.raises(ValueError, match="teacher_self_training_rounds .* privacy_unit: label"):
        _self_training_config(tmp_path, "rec", privacy_unit="record", neighbouring="add_remove")
    with pytest.raises(ValueError, match="vectorised heads"):
        _self_training_config(tmp_path, "prop", teacher_model="propagate")
    with pytest.raises(ValueError, match="teacher_self_training_threshold must lie in"):
        _self_training_config(tmp_path, "thr", teacher_self_training_threshold=0.0)


# the one rule (docs/label_privacy.md, "The relation"): label privacy without replace-one is refused by every
# entry point, with one message; none infers the relation
LABEL_RULE = (
    "privacy_unit 'label' protects one changed label, a replacement that keeps the record's inputs: set "
    "neighbouring: replace_one (--neighbouring replace_one; neighbouring='replace_one' in Python), got "
    "neighbouring="
)


def _refused(call, *args, **kwargs):
    from pate_stab.errors import LabelRelationError

    with pytest.raises(LabelRelationError) as caught:
        call(*args, **kwargs)
    assert str(caught.value).startswith(LABEL_RULE), str(caught.value)
    return str(caught.value)


def test_every_python_entry_point_refuses_label_privacy_without_replace_one(tmp_path):
    import numpy as np

    from pate_stab import Data, compare, transfer
    from pate_stab.run.release_votes import release_votes

    assert _refused(TransferConfig, privacy_unit="label").endswith("neighbouring='add_remove'")
    assert _refused(TransferConfig, privacy_unit="label", neighbouring="add_remove").endswith("'add_remove'")
    assert _refused(TransferConfig.from_dict, {"release": {"privacy_unit": "label"}}).endswith("'add_remove'")
    x, y = make_gaussian_mixture(300, num_classes=C, dim=5, separation=3.0, generator=torch.Generator().manual_seed(0))
    data = Data.arrays((x[:200], y[:200]), x[200:250], (x[250:], y[250:]), classes=C)
    run = {"checkpoints_dir": str(tmp_path / "ck"), "privacy_unit": "label"}
    _refused(transfer, data, run_name="t", **run)
    _refused(compare, data, run_name="c", epsilons=[2.0], **run)
    np.save(tmp_path / "votes.npy", np.zeros((5, 20), dtype=np.int64))
    message = _refused(
        release_votes,
        tmp_path / "votes.npy",
        aggregator="gnmax",
        epsilon=2.0,
        delta=1e-5,
        num_classes=C,
        out_dir=tmp_path / "out",
        privacy_unit="label",
    )
    assert message.endswith("neighbouring=None")  # never inferred
    assert not (tmp_path / "ck").exists() and not (tmp_path / "out").exists()  # refused before anything is written


@pytest.mark.parametrize("command", ["transfer", "compare", "release"])
def test_every_command_refuses_label_privacy_without_replace_one(tmp_path, capsys, command):
    import numpy as np

    from pate_stab.cli.commands import main

    if command == "release":
        np.save(tmp_path / "votes.npy", np.zeros((5, 20), dtype=np.int64))
        out = tmp_path / "out"
        argv = f"release --votes {tmp_path / 'votes.npy'} --num-classes 3 --aggregator gnmax --epsilon 2 --out {out}"
    else:
        g = torch.Generator().manual_seed(0)
        x, y = make_gaussian_mixture(60, num_classes=C, dim=4, separation=3.0, generator=g)
        np.savez(tmp_path / "private.npz", x=x[:40].numpy(), y=y[:40].numpy())
        np.savez(tmp_path / "pool.npz", x=x[40:].numpy())
        choice = "--aggregator" if command == "transfer" else "--aggregators"
        argv = (
            f"{command} --private {tmp_path / 'private.npz'} --public {tmp_path / 'pool.npz'} --classes 3 {choice} "
            f"gnmax --checkpoints-dir {tmp_path / 'ck'} --no-progress"
        )
    with pytest.raises(SystemExit) as exit_:
        main([*argv.split(), "--privacy-unit", "label"])  # paths under tmp_path: no spaces
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"error: {LABEL_RULE}" in err, err
    assert not (tmp_path / "ck").exists() and not (tmp_path / "out").exists()

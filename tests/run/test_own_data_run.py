"""The main job on the user's own data: arrays (Python), .npz files, a CSV with a schema, image folders.

Every data set is built here on the fly; each runs transfer, compare and refit end to end
(CLI and Python), and every bad input exits with status 2 before anything is trained or spent.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from pate_stab import Data, compare, transfer
from pate_stab.cli.commands import main
from pate_stab.data import make_gaussian_mixture
from pate_stab.data.own import InputDataError, load_files
from pate_stab.rng import seeded_generator
from pate_stab.run import TransferConfig, refit_students, run_compare, run_transfer
from pate_stab.run.api import transfer_arrays

PIL = pytest.importorskip("PIL.Image")
SCRIPT = Path(__file__).resolve().parents[2] / "recipes" / "diagnostics" / "refit_students.py"
SMALL = dict(num_teachers=100, num_queries=30, max_unstable=3, epsilon=8.0, teacher_epochs=5, teacher_lr=0.05,
             student_epochs=10, accelerator="cpu", progress=False)  # fmt: skip
FLAGS = ["--num-teachers", "100", "--num-queries", "30", "--max-unstable", "3", "--epsilon", "8",
         "--teacher-epochs", "5", "--set", "teacher_lr=0.05", "--student-epochs", "10", "--accelerator", "cpu",
         "--no-progress"]  # fmt: skip
N_PRIVATE, N_POOL, N_EVAL = 1000, 200, 150


def mixture(seed=0, c=3):
    x, y = make_gaussian_mixture(N_PRIVATE + N_POOL + N_EVAL, num_classes=c, dim=6, separation=6.0,
                                 generator=seeded_generator(seed))  # fmt: skip
    a, b = N_PRIVATE, N_PRIVATE + N_POOL
    return (x[:a], y[:a]), (x[a:b], y[a:b]), (x[b:], y[b:])


def refit_cli(run_dir, *extra):
    spec = importlib.util.spec_from_file_location("refit_students", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--run-dir", str(run_dir), *extra])
    return json.loads((run_dir / "refit_students.json").read_text())


def private_diagnostics(run_dir) -> dict:
    """The run's private diagnostics (mode 0600), after checking that the published report holds
    none of them and lists which file is which."""
    run_dir = Path(run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    assert "teachers" not in report and "private" not in report["sizes"] and "wall_time_s" not in report
    assert "private_diagnostics.json" in report["files"]["private"]
    path = run_dir / "private_diagnostics.json"
    assert path.stat().st_mode & 0o777 == 0o600
    return json.loads(path.read_text())


def exits_2(args, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    return capsys.readouterr().err


# ---- arrays, Python ------------------------------------------------------------------------------


def test_python_arrays_transfer_compare_refit(tmp_path):
    private, (ux, uy), evaluation = mixture()
    result = transfer(
        Data.arrays(private, ux.numpy(), evaluation, classes=["a", "b", "c"]),
        checkpoints_dir=str(tmp_path),
        run_name="arr",
        **SMALL,
    )
    report = result.report
    assert report["dataset"] == "arrays" and report["classes"] == ["a", "b", "c"]
    assert report["queries"]["answered"] >= 20 and report["student"]["test_accuracy"] > 0.9
    # no pool labels: the pool figures are absent, the evaluation figures present
    assert report["pool_labelled"] is False and report["label_accuracy_answered"] is None
    diagnostics = private_diagnostics(result.prep.run_dir)
    assert report["student"]["unlabelled_pool_accuracy"] is None and diagnostics["teachers"]["plurality_accuracy"] > 0.9
    assert diagnostics["sizes"]["private"] == N_PRIVATE
    answered = result.labels != -1
    assert result.labels.shape == result.index.shape and float((result.labels[answered] == uy[result.index[answered]])
                                                                .double().mean()) > 0.9  # fmt: skip
    assert result.student.predict(evaluation[0]).shape == (N_EVAL,)

    out = compare(
        Data.arrays(private, ux, evaluation, classes=3, public_y=uy),
        epsilons=[8.0],
        aggregators=["stability", "gnmax"],
        checkpoints_dir=str(tmp_path),
        run_name="arr_cmp",
        **SMALL,
    )
    assert [r["aggregator"] for r in out.rows] == ["stability", "gnmax"]
    assert all(r["label_acc"] is not None and r["student_acc"] > 0.8 for r in out.rows)  # pool labels given

    ledger = (tmp_path / "arr_cmp" / "ledger.jsonl").read_text()
    # the refit reads the run's data again (its identity is checked: here the pool labels are part of it)
    with pytest.raises(ValueError, match="made with other data"):
        refit_students(tmp_path / "arr_cmp", aggregators=["gnmax"], epsilons=[8.0],
                       data=load_own_arrays(private, ux, evaluation))  # fmt: skip
    data = load_own_arrays(private, ux, evaluation, public_y=uy)
    rows, _, _, _ = refit_students(tmp_path / "arr_cmp", aggregators=["gnmax"], epsilons=[8.0],
                                overrides={"student_epochs": 3}, data=data)  # fmt: skip
    assert rows[0]["answered"] == out.rows[1]["answered"]
    assert (tmp_path / "arr_cmp" / "ledger.jsonl").read_text() == ledger


def load_own_arrays(private, ux, evaluation, public_y=None):
    from pate_stab.data.own import own_data

    return own_data(private, ux, evaluation, classes=3, public_y=public_y)


def test_python_arrays_bad_input_raises_before_any_run_folder(tmp_path):
    private, (ux, _), evaluation = mixture()
    x, y = private
    with pytest.raises(InputDataError, match="private set: x has 1000 records but y has 999 labels"):
        transfer(
            Data.arrays((x, y[:-1]), ux, evaluation, classes=3), checkpoints_dir=str(tmp_path), run_name="bad", **SMALL
        )
    assert not (tmp_path / "bad").exists()


# ---- .npz files, CLI ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def npz_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("npz")
    (px, py), (ux, uy), (ex, ey) = mixture(seed=1)
    np.savez(root / "private.npz", x=px.numpy(), y=py.numpy())
    np.savez(root / "pool.npz", x=ux.numpy())
    np.savez(root / "pool_labelled.npz", x=ux.numpy(), y=uy.numpy())
    np.savez(root / "eval.npz", x=ex.numpy(), y=ey.numpy())
    return root


def test_cli_npz_transfer_compare_refit(npz_files, tmp_path, capsys):
    d = npz_files
    files = ["--private", str(d / "private.npz"), "--public", str(d / "pool.npz"), "--evaluation",
             str(d / "eval.npz"), "--classes", "3", "--checkpoints-dir", str(tmp_path)]  # fmt: skip
    assert main(["transfer", *files, "--run-name", "t", *FLAGS]) == 0
    out = capsys.readouterr().out
    assert "student test accuracy" in out and "label accuracy (answered)" not in out  # the pool has no labels
    report = json.loads((tmp_path / "t" / "report.json").read_text())
    assert report["dataset"] == "files" and report["student"]["test_accuracy"] > 0.9
    assert json.loads((tmp_path / "t" / "config.json").read_text())["private"] == str(d / "private.npz")

    files[3] = str(d / "pool_labelled.npz")
    assert main(["compare", *files, "--run-name", "c", "--epsilons", "8", "--aggregators", "stability", "gnmax",
                 "--pool-labels", *FLAGS]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "c" / "compare.json").read_text())["rows"]
    assert all(r["label_acc"] > 0.9 for r in rows)  # pool labels given: reported
    before = (tmp_path / "c" / "ledger.jsonl").read_text()
    result = refit_cli(tmp_path / "c", "--aggregators", "stability", "gnmax", "--epsilons", "8",
                       "--set", "student_epochs=3")  # fmt: skip
    assert [r["answered"] for r in result["rows"]] == [r["answered"] for r in rows]
    assert (tmp_path / "c" / "ledger.jsonl").read_text() == before


# ---- a CSV with categorical columns and a schema -----------------------------------------------------


def write_table(path, x, y, ids=None, with_label=True):
    colours = ["red", "green", "blue"]
    g = np.random.default_rng(len(x))
    lines = ["rid,x1,x2,colour,label" if with_label else "x1,x2,colour"]
    for i in range(len(x)):
        c = int(y[i])
        colour = colours[c] if g.random() < 0.8 else colours[int(g.integers(3))]
        cells = [f"{float(x[i, 0]):.4f}", f"{float(x[i, 1]):.4f}", colour]
        if with_label:
            cells = [str(int(ids[i])) if ids is not None else str(i)] + cells + [["low", "mid", "high"][c]]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


CSV_SCHEMA = {
    "columns": [
        {"name": "x1", "kind": "numeric", "bounds": [-20, 20]},
        {"name": "x2", "kind": "numeric", "bounds": [-20, 20]},
        {"name": "colour", "kind": "categorical", "categories": ["red", "green", "blue"]},
    ],
    "label": "label",
    "classes": ["low", "mid", "high"],
    "id_column": "rid",
}


@pytest.fixture(scope="module")
def csv_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("csv")
    (px, py), (ux, uy), (ex, ey) = mixture(seed=2)
    ids = np.random.default_rng(0).permutation(10**6)[:N_PRIVATE]
    write_table(root / "private.csv", px, py, ids)
    write_table(root / "pool.csv", ux, uy, with_label=False)
    write_table(root / "eval.csv", ex, ey)
    (root / "schema.json").write_text(json.dumps(CSV_SCHEMA))
    return root


def test_cli_csv_transfer_compare_refit_with_record_ids(csv_files, tmp_path, capsys):
    d = csv_files
    files = ["--private", str(d / "private.csv"), "--public", str(d / "pool.csv"), "--evaluation",
             str(d / "eval.csv"), "--schema", str(d / "schema.json"), "--checkpoints-dir", str(tmp_path),
             "--partition-key", "record_id", "--neighbouring", "replace_one"]  # fmt: skip
    assert main(["transfer", *files, "--run-name", "t", *FLAGS]) == 0
    report = json.loads((tmp_path / "t" / "report.json").read_text())
    assert report["classes"] == ["low", "mid", "high"] and report["features"]["standardized_on"] == "public pool"
    assert report["privacy"]["teachers_changed_per_neighbour"] == 1 and report["student"]["test_accuracy"] > 0.85
    assert main(["compare", *files, "--run-name", "c", "--epsilons", "8", "--aggregators", "gnmax", *FLAGS]) == 0
    capsys.readouterr()
    before = (tmp_path / "c" / "ledger.jsonl").read_text()
    result = refit_cli(tmp_path / "c", "--aggregators", "gnmax", "--epsilons", "8", "--set", "student_epochs=3")
    assert result["rows"][0]["label_acc"] is None  # the pool CSV has no label column
    assert (tmp_path / "c" / "ledger.jsonl").read_text() == before


def test_record_ids_from_the_csv_key_the_partition(csv_files, tmp_path, monkeypatch):
    """The partition is keyed on the ids of the CSV's id column (not row numbers): a record keeps
    its key wherever its row sits in the file."""
    import pate_stab.run.prepare as prepare_module

    seen = []

    def spy(keys, num_teachers, *, generator):
        seen.append(keys.clone())
        raise RuntimeError("stop after the partition")

    monkeypatch.setattr(prepare_module, "partition_indices", spy)
    d = csv_files
    cfg = dict(dataset="files", private=str(d / "private.csv"), public=str(d / "pool.csv"),
               schema=str(d / "schema.json"), partition_key="record_id", checkpoints_dir=str(tmp_path),
               **SMALL)  # fmt: skip
    lines = (d / "private.csv").read_text().splitlines()
    shuffled = tmp_path / "shuffled.csv"
    shuffled.write_text("\n".join([lines[0], *lines[:0:-1]]) + "\n")  # rows reversed
    for name, path in (("a", d / "private.csv"), ("b", shuffled)):
        with pytest.raises(RuntimeError, match="stop after the partition"):
            prepare_module.prepare(TransferConfig(run_name=name, **{**cfg, "private": str(path)}))
    ids = [int(line.split(",")[0]) for line in lines[1:]]
    assert seen[0].tolist() == ids and seen[1].tolist() == ids[::-1]


# ---- an image folder (3 × 16 × 16) -------------------------------------------------------------------


def write_image_set(root, counts, seed, labelled=True):
    """Class c: channel c bright, the others dark, plus noise (3 × 16 × 16 PNGs)."""
    g = np.random.default_rng(seed)
    names = ["red", "green", "blue"]
    for c, n in enumerate(counts):
        folder = root / names[c] if labelled else root
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            arr = g.integers(0, 110, size=(16, 16, 3))
            arr[..., c] += 140
            name = f"{names[c]}_{i:04d}" if labelled else f"{int(g.integers(10**9)):09d}"  # pool: classes mixed
            PIL.fromarray(arr.astype(np.uint8), mode="RGB").save(folder / f"{name}.png")


@pytest.fixture(scope="module")
def image_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    write_image_set(root / "train", [340, 330, 330], seed=0)
    write_image_set(root / "pool", [70, 70, 60], seed=1, labelled=False)
    write_image_set(root / "test", [40, 40, 40], seed=2)
    return root


def test_cli_image_folders_transfer_compare_refit(image_folders, tmp_path, capsys):
    d = image_folders
    files = ["--private", str(d / "train"), "--public", str(d / "pool"), "--evaluation", str(d / "test"),
             "--checkpoints-dir", str(tmp_path)]  # fmt: skip
    assert main(["transfer", *files, "--run-name", "t", *FLAGS]) == 0
    capsys.readouterr()
    report = json.loads((tmp_path / "t" / "report.json").read_text())
    assert report["classes"] == ["blue", "green", "red"]  # the evaluation folder's sub-folders, sorted
    assert report["student"]["model"]["input_shape"] == [3 * 16 * 16] and report["student"]["test_accuracy"] > 0.9
    assert main(["compare", *files, "--run-name", "c", "--epsilons", "8", "--aggregators", "stability", *FLAGS]) == 0
    before = (tmp_path / "c" / "ledger.jsonl").read_text()
    refit_cli(tmp_path / "c", "--aggregators", "stability", "--epsilons", "8", "--set", "student_epochs=3")
    assert (tmp_path / "c" / "ledger.jsonl").read_text() == before


def test_python_image_folders(image_folders, tmp_path):
    d = image_folders
    cfg = TransferConfig(dataset="files", private=str(d / "train"), public=str(d / "pool"),
                         classes=("red", "green", "blue"), checkpoints_dir=str(tmp_path), run_name="p",
                         **SMALL)  # fmt: skip
    report = run_transfer(cfg)
    assert report["classes"] == ["red", "green", "blue"] and report["sizes"]["evaluation"] == 0
    assert report["student"]["test_accuracy"] is None
    assert private_diagnostics(cfg.run_dir)["teachers"]["evaluated_on"] is None
    data = load_files(d / "train", d / "pool", d / "test")
    result = transfer(Data.arrays(data), checkpoints_dir=str(tmp_path), run_name="q", **SMALL)
    assert result.report["student"]["test_accuracy"] > 0.9


# ---- bad input: exit 2, a message naming the problem, nothing trained or spent ------------------------


def bad_npz(root, name, **arrays):
    np.savez(root / name, **arrays)
    return str(root / name)


def test_cli_bad_input_exits_2_before_training(npz_files, csv_files, image_folders, tmp_path, capsys):
    d = npz_files
    x, y = np.load(d / "private.npz")["x"], np.load(d / "private.npz")["y"]
    nan_x = x.copy()
    nan_x[17, 2] = np.nan
    pool, ev = str(d / "pool.npz"), str(d / "eval.npz")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "wrong_size" / "red").mkdir(parents=True)
    write_image_set(bad / "sized", [5, 5, 5], seed=3)
    PIL.fromarray(np.zeros((12, 16, 3), dtype=np.uint8), mode="RGB").save(bad / "sized" / "green" / "odd.png")
    write_image_set(bad / "labelled_pool", [3, 3, 3], seed=4)
    (bad / "empty_pool").mkdir()
    c = csv_files
    (bad / "missing.csv").write_text((c / "private.csv").read_text().replace(",x2,", ",x3,", 1))
    cases = [
        (bad_npz(bad, "len.npz", x=x, y=y[:-1]), pool, ["--classes", "3"], "x has 1000 records but y has 999 labels"),
        (bad_npz(bad, "float.npz", x=x, y=y.astype(float)), pool, ["--classes", "3"], "labels must be integers"),
        (bad_npz(bad, "range.npz", x=x, y=y + 1), pool, ["--classes", "3"], r"must lie in \[0, 3\)"),
        (bad_npz(bad, "nan.npz", x=nan_x, y=y), pool, ["--classes", "3"], "record 17 holds NaN or inf"),
        (str(d / "private.npz"), bad_npz(bad, "empty.npz", x=x[:0]), ["--classes", "3"], "is empty"),
        (str(d / "private.npz"), bad_npz(bad, "ypool.npz", y=y), ["--classes", "3"], "labels in the wrong place"),
        (str(bad / "sized"), str(image_folders / "pool"), ["--classes", "red", "green", "blue"],
         r"sized/green/odd.png: image of size 16×12"),
        (str(image_folders / "train"), str(bad / "labelled_pool"), ["--classes", "red", "green", "blue"],
         "labels in the wrong place"),
        (str(image_folders / "train"), str(bad / "empty_pool"), ["--classes", "red", "green", "blue"],
         "holds no images"),
        (str(bad / "missing.csv"), str(c / "pool.csv"), ["--schema", str(c / "schema.json")],
         r"missing.csv: column 'x3' is not in the schema"),
    ]  # fmt: skip
    for i, (private, public, extra, message) in enumerate(cases):
        err = exits_2(["transfer", "--private", private, "--public", public, *extra, "--checkpoints-dir",
                       str(tmp_path / "runs"), "--run-name", f"r{i}", *FLAGS], capsys)  # fmt: skip
        assert __import__("re").search(message, err), (message, err)
        assert not (tmp_path / "runs" / f"r{i}").exists()  # no folder, no teachers, no ledger
    # an existing run's ledger is left as it was
    assert main(["transfer", "--private", str(d / "private.npz"), "--public", pool, "--evaluation", ev, "--classes",
                 "3", "--checkpoints-dir", str(tmp_path / "runs"), "--run-name", "good", *FLAGS]) == 0  # fmt: skip
    capsys.readouterr()
    before = (tmp_path / "runs" / "good" / "ledger.jsonl").read_bytes()
    err = exits_2(["compare", "--private", cases[0][0], "--public", pool, "--evaluation", ev, "--classes", "3",
                   "--checkpoints-dir", str(tmp_path / "runs"), "--run-name", "good", "--epsilons", "8", *FLAGS],
                  capsys)  # fmt: skip
    assert "y has 999 labels" in err and "len.npz" in err
    assert (tmp_path / "runs" / "good" / "ledger.jsonl").read_bytes() == before


def test_record_id_partition_needs_ids_supplied_with_the_data(tmp_path):
    """DESIGN.md fact 1: record ids come with the data, never from row numbers."""
    private, (ux, _), evaluation = mixture()
    with pytest.raises(ValueError, match="partition_key 'record_id' needs record ids supplied with the private data"):
        transfer(
            Data.arrays(private, ux, evaluation, classes=3),
            partition_key="record_id",
            checkpoints_dir=str(tmp_path),
            run_name="ids",
            **SMALL,
        )
    assert not (tmp_path / "ids").exists()


@pytest.mark.parametrize("kind", ["csv", "images"])
def test_python_files_compare_and_refit(kind, csv_files, image_folders, tmp_path):
    if kind == "csv":
        d = csv_files
        paths = dict(private=str(d / "private.csv"), public=str(d / "pool.csv"), evaluation=str(d / "eval.csv"),
                     schema=str(d / "schema.json"))  # fmt: skip
    else:
        d = image_folders
        paths = dict(private=str(d / "train"), public=str(d / "pool"), evaluation=str(d / "test"))
    cfg = TransferConfig(dataset="files", checkpoints_dir=str(tmp_path), run_name=kind, **paths, **SMALL)
    out = run_compare(cfg, epsilons=[8.0], aggregators=["stability"])
    (row,) = out["rows"]
    assert row["answered"] >= 20 and row["student_acc"] > 0.85 and row["label_acc"] is None  # pools unlabelled
    before = (tmp_path / kind / "ledger.jsonl").read_text()
    rows, new, _, _ = refit_students(tmp_path / kind, aggregators=["stability"], epsilons=[8.0],
                                  overrides={"student_model": "logistic"})  # fmt: skip
    assert new.student_model == "logistic" and rows[0]["answered"] == row["answered"]
    assert (tmp_path / kind / "ledger.jsonl").read_text() == before


def test_recipe_with_dataset_files(npz_files, tmp_path, capsys):
    d = npz_files
    recipe = tmp_path / "mine.yaml"
    recipe.write_text(
        f"dataset: files\nprivate: {d / 'private.npz'}\npublic: {d / 'pool.npz'}\nevaluation: {d / 'eval.npz'}\n"
        f"classes: [a, b, c]\nrun_name: mine\ncheckpoints_dir: {tmp_path}\nstop_after: release\n"
    )
    assert main(["transfer", "--config", str(recipe), *FLAGS]) == 0
    assert "stopped after stage 'release'" in capsys.readouterr().out
    saved = json.loads((tmp_path / "mine" / "config.json").read_text())
    assert saved["classes"] == ["a", "b", "c"] and saved["evaluation"] == str(d / "eval.npz")
    err = exits_2(["transfer", "--config", str(recipe), "--public", str(d / "missing.npz"), *FLAGS], capsys)
    assert "missing.npz not found" in err


@pytest.mark.parametrize("features", ["pca", "scattering"])
def test_fitted_features_without_an_evaluation_set(image_folders, tmp_path, features):
    """Features fitted on the public pool work with no evaluation set; pool labels (reporting only) are reported."""
    data = load_files(image_folders / "train", image_folders / "pool", image_folders / "test")
    from pate_stab.data.own import own_data

    pool_y = torch.zeros(data.public_x.shape[0], dtype=torch.int64)  # labels for reporting only
    mine = own_data((data.private_x, data.private_y), data.public_x, classes=3, public_y=pool_y)
    # the stability releaser may answer nothing here (secure noise): keep the student whatever it learnt
    result = transfer(
        Data.arrays(mine),
        features=features,
        pca_dim=10,
        checkpoints_dir=str(tmp_path),
        run_name=features,
        allow_empty_student=True,
        **SMALL,
    )
    report = result.report
    assert report["features"]["kind"] == features and report["sizes"]["evaluation"] == 0
    assert report["student"]["test_accuracy"] is None and report["label_accuracy_all_queries"] is not None


def test_direct_learner_rows_on_arrays_without_pool_labels_or_evaluation_set(tmp_path):
    private, (ux, _), _ = mixture()
    # the heads calibrate on a public size N (private_size_hint: own data have no documented one)
    out = compare(
        Data.arrays(private, ux, None, classes=3),
        epsilons=[8.0],
        aggregators=["gnmax"],
        private_size_hint=500,
        direct=["output-softmax"],
        checkpoints_dir=str(tmp_path),
        run_name="d",
        **SMALL,
    )
    row = [r for r in out.rows if r["aggregator"] == "output-softmax"][0]
    # no evaluation set and no pool labels: the direct row's accuracies are absent, not computed on nothing
    assert row["student_acc"] is None and row["student_acc_unlabelled_pool"] is None and row["epsilon"] <= 8.0
    with pytest.raises(ValueError, match="direct learner"), pytest.warns(DeprecationWarning, match="transfer_arrays"):
        transfer_arrays(private, ux, None, classes=3, aggregator="output-softmax", checkpoints_dir=str(tmp_path),
                        run_name="e", **SMALL)  # fmt: skip


# ---- own data through the later additions: rounds on rebuilt teachers, combined image features --------


def test_python_arrays_release_in_rounds_with_teachers_on_the_students_representation(tmp_path):
    private, (ux, _), evaluation = mixture()
    settings = {**SMALL, "teacher_model": "propagate", "rounds": 2, "round_features": "student", "epsilon": 16.0}
    result = transfer(
        Data.arrays(private, ux.numpy(), evaluation, classes=3),
        checkpoints_dir=str(tmp_path),
        run_name="arr_rounds",
        **settings,
    )
    rounds = result.report["rounds"]
    assert [r["teachers"] for r in rounds] == ["the run's", "rebuilt on the student's hidden layer"]
    assert sum(r["answered"] for r in rounds) == result.report["queries"]["answered"] > 0
    (rebuilt,) = private_diagnostics(result.prep.run_dir)["rounds_teachers"]
    hidden = TransferConfig().student_hidden[-1]
    assert rebuilt["round"] == 2 and rebuilt["teacher_features"] == f"student hidden layer ({hidden})"


def test_cli_image_folders_with_combined_features(image_folders, tmp_path, capsys):
    d = image_folders
    files = ["--private", str(d / "train"), "--public", str(d / "pool"), "--evaluation", str(d / "test"),
             "--checkpoints-dir", str(tmp_path)]  # fmt: skip
    args = ["transfer", *files, "--run-name", "combo", "--features", "scattering+ssl", "--set", "ssl_epochs=1",
            "--pca-dim", "0.95", "--releaser-noise", "seeded", *FLAGS]  # seeded: the same release each run  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    report = json.loads((tmp_path / "combo" / "report.json").read_text())
    blocks = report["features"]["blocks"]
    assert [b["name"] for b in blocks] == ["scattering", "ssl"]
    assert report["student"]["model"]["input_shape"] == [sum(b["dim"] for b in blocks)]
    # one SSL epoch on 200 pool images: the student learns from the joined features, well above chance (1/3)
    assert report["student"]["test_accuracy"] > 0.6

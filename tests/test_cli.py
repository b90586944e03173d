"""The pate-stab command line: demo end to end, calibrate, compare, and usage errors (exit 2)."""

from __future__ import annotations

import json

import pytest

from pate_stab.cli.commands import main

FAST = ["--num-teachers", "300", "--num-queries", "100", "--teacher-epochs", "5", "--student-epochs", "6",
        "--set", "num_private=6000", "--set", "separation=6.0", "--set", "teacher_lr=0.05",
        "--set", "num_public=400", "--set", "num_eval=300", "--accelerator", "cpu", "--no-progress"]  # fmt: skip


def run_cli(args, capsys):
    code = main(args)
    return code, capsys.readouterr()


def exits_2(args, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    return capsys.readouterr().err


def test_demo_end_to_end(tmp_path, capsys):
    code, out = run_cli(["demo", "--checkpoints-dir", str(tmp_path), *FAST], capsys)
    assert code == 0
    assert "student test accuracy" in out.out and "queries seen / answered" in out.out
    report = json.loads((tmp_path / "demo" / "report.json").read_text())
    assert report["dataset"] == "synthetic" and report["aggregator"] == "stability"
    assert report["queries"]["answered"] >= 90
    assert report["student"]["test_accuracy"] > 0.9


def test_compare_writes_table_and_plot(tmp_path, capsys):
    args = ["compare", "--checkpoints-dir", str(tmp_path), "--run-name", "cmp", "--epsilons", "4", "8",
            "--aggregators", "stability", "gnmax", *FAST]  # fmt: skip
    code, out = run_cli(args, capsys)
    assert code == 0
    assert "gnmax" in out.out and "stability" in out.out
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [(r["aggregator"], r["target_epsilon"]) for r in data["rows"]] == [
        ("stability", 4.0), ("gnmax", 4.0), ("stability", 8.0), ("gnmax", 8.0)
    ]  # fmt: skip
    assert (tmp_path / "cmp" / "compare.png").read_bytes()[:4] == b"\x89PNG"
    # four releases, four spends; the stability row at ε=4 says what it would need
    assert data["ledger"]["num_spends"] == 4
    assert "teachers_needed" in data["rows"][0]


def test_compare_with_query_selection(tmp_path, capsys):
    """Every row chooses its queries with the same procedure; one spend per row, at most m queries."""
    args = ["compare", "--checkpoints-dir", str(tmp_path), "--run-name", "sel", "--epsilons", "8",
            "--aggregators", "stability", "gnmax", "--query-selection", "student-confidence", *FAST]  # fmt: skip
    code, out = run_cli(args, capsys)
    assert code == 0 and "query selection: student-confidence" in out.out
    data = json.loads((tmp_path / "sel" / "compare.json").read_text())
    assert data["query_selection"]["strategy"] == "student-confidence"
    assert data["ledger"]["num_spends"] == 2
    for row in data["rows"]:
        assert row["query_selection"] == "student-confidence" and row["selection_rounds"] >= 1
        assert row["answered"] <= row["offered"] <= 100


def test_unknown_query_selection(tmp_path, capsys):
    err = exits_2(["demo", "--checkpoints-dir", str(tmp_path), "--query-selection", "oracle"], capsys)
    assert "query_selection must be one of first, student-confidence" in err


def test_calibrate_prints_both_modes(capsys):
    code, out = run_cli(["calibrate", "--epsilon", "3", "--num-queries", "1000", "--max-unstable", "10"], capsys)
    assert code == 0
    assert "paper" in out.out and "tight" in out.out and "k ≈" in out.out


def test_unknown_dataset(capsys):
    assert "unknown dataset 'imagenet'" in exits_2(["transfer", "--dataset", "imagenet"], capsys)


def test_missing_data_dir(tmp_path, capsys):
    err = exits_2(["transfer", "--dataset", "mnist", "--data-dir", str(tmp_path / "nowhere")], capsys)
    assert "does not exist" in err
    assert "needs --data-dir" in exits_2(["transfer", "--dataset", "mnist"], capsys)


def test_data_dir_without_files(tmp_path, capsys):
    err = exits_2(["transfer", "--dataset", "mnist", "--data-dir", str(tmp_path),
                   "--checkpoints-dir", str(tmp_path / "ck")], capsys)  # fmt: skip
    assert "MNIST" in err or "idx" in err


def test_budget_too_small_says_what_is_needed(tmp_path, capsys):
    err = exits_2(["demo", "--checkpoints-dir", str(tmp_path), "--epsilon", "0.5"], capsys)
    assert "budget too small" in err and "needs about k=" in err and "ε ≥" in err


def test_bad_values_and_keys(tmp_path, capsys):
    assert "unknown configuration keys" in exits_2(["demo", "--set", "colour=blue"], capsys)
    assert "aggregator" in exits_2(["demo", "--aggregator", "median"], capsys)
    assert "delta" in exits_2(["demo", "--delta", "2"], capsys)
    assert "config file" in exits_2(["transfer", "--config", str(tmp_path / "none.yaml")], capsys)


def test_recipes_parse():
    from pathlib import Path

    import yaml

    from pate_stab.run import TransferConfig

    recipes = sorted((Path(__file__).resolve().parents[1] / "recipes" / "configs").glob("*.yaml"))
    assert {p.stem for p in recipes} >= {"mnist_quick", "mnist_gpu", "fashion_mnist_quick", "svhn_gpu",
                                         "cifar10_gpu", "adult"}  # fmt: skip
    for path in recipes:
        data = yaml.safe_load(path.read_text())
        data.pop("compare", None)
        TransferConfig.from_dict(data)


def test_transfer_summary_separates_bottom_from_not_asked(tmp_path, capsys):
    """A releaser that halts after T ⊥ reports those ⊥ apart from the queries it never processed."""
    args = ["transfer", "--checkpoints-dir", str(tmp_path), "--run-name", "halt", "--epsilon", "1",
            "--max-unstable", "2", "--allow-unanswerable", "--allow-empty-student", *FAST, "--num-teachers", "20",
            "--teacher-epochs", "1", "--student-epochs", "1"]  # fmt: skip
    code, out = run_cli(args, capsys)
    assert code == 0
    q = json.loads((tmp_path / "halt" / "report.json").read_text())["queries"]
    assert q["halted"] and q["abstained"] == 2
    assert q["seen"] == q["answered"] + 2 and q["not_asked"] == 100 - q["seen"] > 0
    assert f"{q['seen']} / {q['answered']} / 2 (halted: {q['not_asked']} not asked)" in out.out
    assert "add/remove (content partition keys; 1 teacher per neighbour)" in out.out


def test_noise_defaults_are_secure():
    """Every entry point draws secure noise unless seeded noise is asked for by name."""
    from pate_stab.cli.commands import _config_dict, _make_config, build_parser

    parser = build_parser()
    args = parser.parse_args(["transfer", "--run-name", "x"])
    assert _make_config(parser, _config_dict(parser, args, {})).releaser_noise == "secure"
    args = parser.parse_args(["transfer", "--run-name", "x", "--releaser-noise", "seeded"])
    assert _make_config(parser, _config_dict(parser, args, {})).releaser_noise == "seeded"
    release = parser.parse_args(["release", "--votes", "v.npy", "--aggregator", "gnmax", "--epsilon", "1"])
    assert release.noise == "secure"


def test_the_parser_takes_its_choices_from_the_vocabularies() -> None:
    """Each vocabulary is written once (pate_stab/vocabulary.py): no flag spells one of them out again."""
    import ast
    import typing
    from pathlib import Path

    import pate_stab.vocabulary as vocabulary

    words = {frozenset(typing.get_args(v)) for v in vars(vocabulary).values() if typing.get_origin(v) is typing.Literal}
    assert frozenset(("add_remove", "replace_one")) in words and frozenset(("secure", "seeded")) in words
    cli = Path(vocabulary.__file__).parent / "cli"
    spelled = []
    for path in sorted(cli.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "choices" and isinstance(node.value, ast.Tuple):
                values = frozenset(e.value for e in node.value.elts if isinstance(e, ast.Constant))
                if values in words:
                    spelled.append(f"{path.name}:{node.value.lineno}: {sorted(values)}")
    assert not spelled, f"use the vocabulary's get_args instead: {spelled}"

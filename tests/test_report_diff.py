"""recipes/diagnostics/report_diff.py: its cases parse as the CLI reads them, and ``diff`` sees what differs."""

from __future__ import annotations

import json
from pathlib import Path

from tests._recipes import load_recipe

report_diff = load_recipe("diagnostics/report_diff.py")


def _config(command: str, extra: list[str]):
    from pate_stab.cli.commands import build_parser
    from pate_stab.cli.config import _config_dict, _make_config

    parser = build_parser()
    args = parser.parse_args([command, *extra, "--run-name", command, "--releaser-noise", "seeded", "--no-progress"])
    return _make_config(parser, _config_dict(parser, args, {}))


def test_the_label_case_states_its_relation_and_runs_every_label_spend():
    """The label case is a label-privacy transfer and compare with replace-one stated (so the code before
    and after the one label-privacy rule read it alike), whose compare holds label-DP and record rows."""
    case = report_diff.cases(Path("data"))["label"]
    assert set(case) == {"transfer", "compare"}
    assert set(report_diff.CASES) == set(report_diff.cases(Path("data")))
    for command, extra in case.items():
        config = _config(command, extra)
        assert config.privacy_unit == "label" and config.neighbouring == "replace_one"
        assert config.releaser_noise == "seeded"
    compare = case["compare"]
    direct = compare[compare.index("--direct") + 1 :]
    assert {"rr-lp1st", "alibi", "dpsgd-linear"} <= set(direct)


def _write(folder: Path, report: dict) -> None:
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(report))


def test_diff_leaves_out_wall_times_and_run_paths_and_reports_a_changed_value(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a / "synthetic" / "transfer", {"acc": 0.9, "wall_seconds": 3.0, "out": str(a / "synthetic" / "transfer")})
    _write(b / "synthetic" / "transfer", {"acc": 0.9, "wall_seconds": 7.0, "out": str(b / "synthetic" / "transfer")})
    assert report_diff.diff(a, b) == []
    (b / "synthetic" / "transfer" / "report.json").write_text(json.dumps({"acc": 0.8, "out": "x"}))
    assert report_diff.diff(a, b) == [
        "synthetic/transfer/report.json: .acc: 0.9 != 0.8",
        "synthetic/transfer/report.json: .out: '<run>' != 'x'",
    ]


def test_each_run_spends_against_its_own_fresh_budget_folder(tmp_path, monkeypatch):
    """The cases spend on the same data sets beyond one cap: each command gets a new, empty budget folder."""
    seen: list[str] = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    def fake_run(args, *, env, **_):
        folder = Path(env[report_diff.BUDGET_DIR_ENV])
        assert folder.is_dir() and not any(folder.iterdir())
        seen.append(str(folder))
        return Done()

    monkeypatch.setattr(report_diff.subprocess, "run", fake_run)
    report_diff.run(report_diff.HERE, tmp_path / "out", ["synthetic", "label"], tmp_path)
    assert len(seen) == 4 and len(set(seen)) == 4
    assert not any(Path(f).exists() for f in seen)

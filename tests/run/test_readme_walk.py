"""README "Your own data", "A walk": every command of the walk, verbatim, on smaller generated
data (a few flags appended to keep it to seconds: fewer teachers, queries and epochs)."""

from __future__ import annotations

import csv
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

import pate_stab
from pate_stab.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--num-teachers", "30", "--num-queries", "40", "--teacher-epochs", "3", "--student-epochs", "5",
        "--accelerator", "cpu", "--no-progress", "--set", "dpsgd_epochs=2"]  # fmt: skip


def walk_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- walk -->\n```bash\n(.*?)```\n<!-- /walk -->", text, re.S)
    assert block, "README's walk block is missing"
    return [shlex.split(line) for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


# slow tier: the walk repeats paths the fast tier runs. tests/test_doc_commands.py parses every command of the
# walk (and of every doc); tests/run/test_own_data_run.py runs transfer, compare and the refit through the command
# line on .npz files, a CSV with a schema and image folders; `pate-stab predict` runs in tests/run/test_student_file.py
# and `pate-stab plan` in tests/run/test_plan.py.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_readme_walk_runs_verbatim(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    commands = walk_commands()
    assert [c[0] for c in commands] == ["python"] + ["pate-stab"] * (len(commands) - 1)
    assert {c[1] for c in commands[1:]} == {"plan", "transfer", "compare", "predict"}
    spec = importlib.util.spec_from_file_location("make_own_data", ROOT / commands[0][1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main([*commands[0][2:], "--rows", "600", "200", "200", "--images", "240", "90", "90"])
    for command in commands[1:]:
        args = command[1:]
        if args[0] in ("transfer", "compare"):
            args = [*args, *FAST]
        assert main(args) == 0, command
    out = capsys.readouterr().out
    assert "teachers agree" in out and "dpsgd-linear" in out
    for name, classes in (
        ("table_predictions.csv", {"no", "yes"}),
        ("shapes_predictions.csv", {"bar", "cross", "ring"}),
    ):
        rows = list(csv.DictReader((tmp_path / name).open()))
        assert len(rows) == 10 and {r["class"] for r in rows} <= classes
    student = pate_stab.load_student(tmp_path / "checkpoints" / "table" / "student.pt")
    assert student.predict([{"age": "61", "bmi": "31", "ward": "C", "smoker": "no"}]).shape == (1,)


def test_the_walks_data_script_writes_every_file_its_commands_read(tmp_path, monkeypatch):
    """The fast part of the walk: its first command (the data script, on fewer rows and images) writes every
    ``mydata/…`` path the later commands read."""
    monkeypatch.chdir(tmp_path)
    commands = walk_commands()
    spec = importlib.util.spec_from_file_location("make_own_data", ROOT / commands[0][1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main([*commands[0][2:], "--rows", "60", "20", "20", "--images", "24", "9", "9"])
    read = [arg for command in commands[1:] for arg in command if arg.startswith("mydata/")]
    assert len(read) >= 10
    missing = [path for path in read if not (tmp_path / path).exists()]
    assert not missing, missing

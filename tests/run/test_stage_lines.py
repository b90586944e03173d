"""One line per finished stage (``stage <name>: <s> s on <device>``) from ``transfer`` and
``compare``, also under ``--no-progress``; the times stay in the private diagnostics file."""

from __future__ import annotations

import json
import logging
import re

import torch

from pate_stab.cli.commands import main
from pate_stab.run.progress import STAGE_LOGGER, accelerator_device, print_stage_lines, report_stage, stage_line

SMALL = ["--num-teachers", "20", "--num-queries", "40", "--teacher-epochs", "2", "--student-epochs", "2",
         "--set", "num_private=1500", "--set", "num_public=200", "--set", "num_eval=100", "--accelerator", "cpu",
         "--no-progress"]  # fmt: skip
LINE = re.compile(r"^stage (.+): \d+\.\d s on (\S+)( \(\w+\))?$")


def _stages(out: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(LINE.match, out.splitlines()) if m]


def test_stage_line_and_devices(monkeypatch):
    assert stage_line("teachers", 41.23, "cuda") == "stage teachers: 41.2 s on cuda"
    assert accelerator_device("cpu") == "cpu" and accelerator_device("gpu") == "cuda"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert accelerator_device("auto") == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert accelerator_device("auto") == "cpu"


def test_stage_lines_go_to_the_current_stdout_flushed(monkeypatch):
    class Stream:
        def __init__(self) -> None:
            self.text, self.flushes = "", 0

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            self.flushes += 1

    stream = Stream()
    monkeypatch.setattr("sys.stdout", stream)
    logger = logging.getLogger(STAGE_LOGGER)
    monkeypatch.setattr(logger, "handlers", [])
    print_stage_lines()
    print_stage_lines()  # idempotent: one handler
    timings: dict[str, float] = {}
    devices: dict[str, str] = {}
    report_stage(timings, "student", 2.04, "cuda", devices)
    assert stream.text == "stage student: 2.0 s on cuda\n" and stream.flushes >= 1
    assert timings == {"student": 2.04} and devices == {"student": "cuda"}


def test_transfer_prints_each_stage_once_and_keeps_times_private(tmp_path, capsys):
    args = ["transfer", "--checkpoints-dir", str(tmp_path), "--run-name", "st", "--aggregator", "gnmax", *SMALL]
    assert main(args) == 0
    stages = _stages(capsys.readouterr().out)
    names = [n for n, _ in stages]
    assert names == ["data", "plan", "partition", "teachers", "votes", "release", "student", "data-dependent",
                     "report"]  # fmt: skip
    assert all(device == "cpu" for _, device in stages)
    private = json.loads((tmp_path / "st" / "private_diagnostics.json").read_text())
    assert set(names[:-1]) <= set(private["wall_time_s"]) and private["stage_device"]["teachers"] == "cpu"
    report = (tmp_path / "st" / "report.json").read_text()
    assert "wall_time" not in report and "stage_device" not in report  # wall times are private (fact 8)


def test_compare_prints_each_rows_stages(tmp_path, capsys):
    args = ["compare", "--checkpoints-dir", str(tmp_path), "--run-name", "cmp", "--epsilons", "8",
            "--aggregators", "gnmax", "--direct", "output-softmax", *SMALL]  # fmt: skip
    assert main(args) == 0
    names = [n for n, _ in _stages(capsys.readouterr().out)]
    assert names[:4] == ["data", "plan", "partition", "teachers"]
    assert names[4:] == ["votes (gnmax ε=8)", "release (gnmax ε=8)", "data-dependent (gnmax ε=8)",
                         "student (gnmax ε=8)", "direct output-softmax ε=8", "report"]  # fmt: skip
    private = json.loads((tmp_path / "cmp" / "private_compare.json").read_text())
    assert "student (gnmax ε=8)" in private["wall_time_s"]
    assert "wall_time" not in (tmp_path / "cmp" / "compare.json").read_text()

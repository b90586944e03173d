"""Progress bars: the default (terminal yes; CI or a pipe no), and every long stage's bar."""

from __future__ import annotations

import io

import pytest
import torch

from pate_stab.models import ModelSpec, init_stacked_parameters
from pate_stab.rng import seeded_generator
from pate_stab.run import run_transfer
from pate_stab.run.progress import default_progress
from pate_stab.teachers import PoolVotes, TeacherEnsemble
from tests.run.test_transfer import small


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "environ", "expected"),
    [
        (_Terminal(), {}, True),
        (_Terminal(), {"CI": "0"}, True),
        (_Terminal(), {"CI": ""}, True),
        (_Terminal(), {"CI": "1"}, False),
        (_Terminal(), {"CI": "true"}, False),
        (io.StringIO(), {}, False),  # a pipe or a file
    ],
)
def test_default_progress(stream, environ, expected):
    assert default_progress(stream=stream, environ=environ) is expected


def test_default_progress_reads_ci_from_the_environment(monkeypatch):
    monkeypatch.setenv("CI", "1")
    assert default_progress(stream=_Terminal()) is False
    monkeypatch.delenv("CI")
    assert default_progress(stream=_Terminal()) is True


def _votes(progress: bool) -> PoolVotes:
    spec = ModelSpec("mlp", (4,), 3, hidden=(5,))
    teachers = TeacherEnsemble(spec, init_stacked_parameters(spec, list(range(7))))
    pool = torch.randn(50, 4, generator=seeded_generator(0))
    return PoolVotes(teachers, pool, 3, progress=progress)


def test_pool_votes_bar_off_under_ci_on_when_forced(monkeypatch, capsys):
    monkeypatch.setenv("CI", "1")
    _votes(default_progress()).histograms(torch.arange(50))
    assert "teacher votes" not in capsys.readouterr().err
    _votes(True).histograms(torch.arange(50))
    assert "teacher votes" in capsys.readouterr().err


@pytest.mark.parametrize("progress", [False, True])
def test_transfer_stage_bars(tmp_path, capfd, progress):
    cfg = small(tmp_path, num_teachers=200, num_private=3000, teacher_epochs=1, stop_after="release", progress=progress)
    run_transfer(cfg)
    out = capfd.readouterr()
    shown = out.out + out.err
    assert ("teachers (200, vectorized)" in shown) is progress  # one bar over every step of the teachers' fit
    assert ("release stability" in shown) is progress  # the release rounds

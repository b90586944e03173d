"""The session fixtures of tests/run/conftest.py: seeded teachers are the pipeline's resumed teachers, the
accounting memo returns what the accountant computes."""

from __future__ import annotations

import pytest
import torch

import pate_stab.teachers.registry as teacher_registry
from pate_stab.aggregation.baselines import GNMax
from pate_stab.privacy.accounting.events import GaussianEvent, SelfComposedEvent
from pate_stab.run import TransferConfig
from pate_stab.run.prepare import prepare
from tests.run.conftest import _EPSILONS, _accountant_epsilon, _calibrate_scale, teachers_key


def _config(tmp_path, name: str, **kw) -> TransferConfig:
    settings = dict(num_teachers=20, num_private=1000, num_public=150, num_eval=50, num_queries=20, teacher_epochs=1)
    return TransferConfig(run_name=name, checkpoints_dir=str(tmp_path), accelerator="cpu", **{**settings, **kw})


def test_seeded_teachers_are_reloaded_by_the_resume_rule_not_trained(tmp_path, monkeypatch, trained_teachers):
    config = _config(tmp_path, "a")
    trained_before = trained_teachers.trained
    source = trained_teachers.folder(config)
    assert trained_teachers.trained == trained_before + 1  # trained once for these settings
    # a run that differs only after the teachers (aggregator, ε, m, student) gets the same folder
    other = _config(tmp_path, "b", aggregator="gnmax", epsilon=2.0, num_queries=10, student_epochs=1)
    assert trained_teachers.folder(other) == source and trained_teachers.trained == trained_before + 1
    # data or teacher settings that differ get their own
    assert teachers_key(_config(tmp_path, "c", seed=1)) != teachers_key(config)
    assert teachers_key(_config(tmp_path, "d", teacher_epochs=2)) != teachers_key(config)
    monkeypatch.setattr(teacher_registry, "train_teachers", lambda *a, **k: pytest.fail("teachers trained again"))
    prep = prepare(trained_teachers.seed(other))
    assert prep.resumed_teachers
    weights = torch.load(source / "weights.pt")["params"]
    assert all(torch.equal(prep.teachers.params[k], weights[k]) for k in weights)
    with pytest.raises(FileExistsError):
        trained_teachers.seed(other)


def test_the_accounting_memo_returns_the_accountants_figures():
    event = SelfComposedEvent(GaussianEvent(sigma=40.0, sensitivity=2**0.5), 100)
    import pate_stab.privacy.accounting.composition as composition

    assert composition.accountant_epsilon is not _accountant_epsilon  # installed for tests/run
    first = composition.accountant_epsilon(event, delta=1e-5, accountant="rdp")
    assert (event, 1e-5, "rdp") in _EPSILONS
    assert first == _accountant_epsilon(event, delta=1e-5, accountant="rdp")
    assert composition.accountant_epsilon(event, delta=1e-5, accountant="rdp") == first
    # the baselines' calibration: the same σ as the function it wraps
    sigma = GNMax.calibrate(epsilon=1.0, delta=1e-5, num_queries=10, noise="secure").sigma
    again = GNMax.calibrate(epsilon=1.0, delta=1e-5, num_queries=10, noise="secure").sigma
    assert sigma == again
    with pytest.MonkeyPatch.context() as mp:
        import pate_stab.aggregation.baselines as baselines

        mp.setattr(baselines, "calibrate_scale", _calibrate_scale)
        assert GNMax.calibrate(epsilon=1.0, delta=1e-5, num_queries=10, noise="secure").sigma == sigma

import pytest
import torch

from pate_stab.data import make_gaussian_mixture
from pate_stab.models import ModelSpec, init_stacked_parameters
from pate_stab.rng import seeded_generator
from pate_stab.teachers import (
    TeacherEnsemble,
    TrainConfig,
    epoch_plan,
    partition_indices,
    record_keys_from_tensors,
    train_teachers,
)

SPEC = ModelSpec("mlp", (4,), 3, hidden=(8,))
CFG = TrainConfig(epochs=3, batch_size=8, lr=1e-2)


def _problem(n=240, k=6, seed=0):
    x, y = make_gaussian_mixture(n, num_classes=3, dim=4, generator=seeded_generator(seed))
    shards = partition_indices(record_keys_from_tensors(x, y), k, generator=seeded_generator(seed + 1))
    return x, y, shards


def _train(x, y, shards, **kw):
    kw.setdefault("config", CFG)
    kw.setdefault("accelerator", "cpu")  # these tests compare numbers: never a GPU that "auto" may find
    return train_teachers(x, y, shards, spec=SPEC, generator=seeded_generator(7), **kw)


def test_epoch_plan_cycles_own_shard_only():
    shard = torch.tensor([3, 9, 11, 20, 41])
    plan = epoch_plan(shard, seed=1, epoch=0, batch_size=4)
    assert plan.shape == (2, 4)
    assert set(plan.flatten().tolist()) == set(shard.tolist())  # every record, nothing else
    assert not torch.equal(plan, epoch_plan(shard, seed=1, epoch=1, batch_size=4))
    assert epoch_plan(torch.zeros(0, dtype=torch.long), seed=1, epoch=0, batch_size=4).shape == (
        0,
        4,
    )


def test_each_teacher_depends_only_on_its_shard():
    x, y, shards = _problem()
    j = 2
    base = _train(x, y, shards)
    # perturb shard j's records (features and labels)
    x2, y2 = x.clone(), y.clone()
    x2[shards[j]] += torch.randn(len(shards[j]), 4, generator=seeded_generator(99))
    y2[shards[j]] = (y2[shards[j]] + 1) % 3
    perturbed = _train(x2, y2, shards)
    # and grow shard j by 40 records (this changes the number of steps per epoch)
    xe, ye = make_gaussian_mixture(40, num_classes=3, dim=4, generator=seeded_generator(5))
    x3, y3 = torch.cat([x, xe]), torch.cat([y, ye])
    grown = list(shards)
    grown[j] = torch.cat([shards[j], torch.arange(len(x), len(x) + 40)])
    enlarged = _train(x3, y3, grown)
    assert max(len(s) for s in grown) > max(len(s) for s in shards)
    for other in (perturbed, enlarged):
        for name, p in base.params.items():
            q = other.params[name]
            assert not torch.equal(p[j], q[j])
            keep = [i for i in range(len(shards)) if i != j]
            assert torch.equal(p[keep], q[keep]), name  # bit-identical


@pytest.mark.accelerator
def test_vectorized_matches_sequential():
    x, y, shards = _problem(n=120, k=3)
    cfg = TrainConfig(epochs=2, batch_size=8, lr=5e-2, optimizer="sgd", momentum=0.9)
    for config in (CFG, cfg):
        vec = _train(x, y, shards, config=config)
        seq = _train(x, y, shards, config=config, mode="sequential")
        for name in vec.params:
            # same seeds and data order; only summation order in batched kernels may differ
            torch.testing.assert_close(vec.params[name], seq.params[name], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(vec.metrics["train_loss"], seq.metrics["train_loss"])


def test_slices_by_teacher_index_join_to_full():
    x, y, shards = _problem()
    full = _train(x, y, shards)
    parts = [
        _train(x, y, shards, teacher_indices=[4, 5, 0]),
        _train(x, y, shards, teacher_indices=[1, 2, 3]),
    ]
    joined = TeacherEnsemble.concatenate(parts)
    assert joined.teacher_indices.tolist() == list(range(6))
    for name in full.params:
        torch.testing.assert_close(joined.params[name], full.params[name], rtol=1e-6, atol=1e-7)


class _Interrupt(Exception):
    pass


class _StopAt(__import__("lightning").Callback):
    def __init__(self, epoch):
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch == self.epoch:
            raise _Interrupt


@pytest.mark.accelerator
def test_resume_after_interruption_reproduces(tmp_path):
    x, y, shards = _problem()
    cfg = TrainConfig(epochs=4, batch_size=8, lr=1e-2, patience=2, min_delta=0.05)
    straight = _train(x, y, shards, config=cfg)
    run = tmp_path / "checkpoints" / "run1" / "teachers"
    with pytest.raises(_Interrupt):
        _train(x, y, shards, config=cfg, run_dir=run, callbacks=[_StopAt(2)])
    assert (run / "lightning" / "last.ckpt").is_file()
    resumed = _train(x, y, shards, config=cfg, run_dir=run, resume=True)
    for name in straight.params:
        assert torch.equal(straight.params[name], resumed.params[name])
    assert torch.equal(straight.metrics["train_loss"], resumed.metrics["train_loss"])
    loaded = TeacherEnsemble.load(run)
    assert loaded.spec == SPEC and loaded.config["train"]["epochs"] == 4
    xq = torch.randn(10, 4, generator=seeded_generator(3))
    assert torch.equal(loaded.predict_votes(xq), straight.predict_votes(xq))
    # the private data is never in the checkpoint
    ckpt = torch.load(run / "lightning" / "last.ckpt", weights_only=False)
    assert all(v.shape[0] != len(x) for v in ckpt["state_dict"].values())


def test_per_teacher_early_stopping_freezes():
    x, y, shards = _problem()
    cfg = TrainConfig(epochs=6, batch_size=8, lr=1e-2, patience=1, min_delta=10.0)  # never improves
    ens = _train(x, y, shards, config=cfg)
    # epoch 0 sets the best loss, epoch 1 fails to improve, then all stop
    assert ens.metrics["train_loss"].shape[0] == 2


def test_exports_shapes_and_ranges():
    x, y, shards = _problem()
    ens = _train(x, y, shards)
    xq = torch.randn(17, 4, generator=seeded_generator(3))
    votes = ens.predict_votes(xq, batch_size=5, teacher_chunk=4)
    assert votes.shape == (6, 17) and votes.dtype == torch.int64
    scores = ens.predict_scores(xq, batch_size=5, teacher_chunk=4)
    assert scores.shape == (6, 17, 3) and bool(((scores >= 0) & (scores <= 1)).all())
    assert torch.equal(scores.argmax(-1), votes)
    with pytest.raises(ValueError, match="binary"):
        ens.predict_scores(xq, binary=True)


def test_binary_scores_and_bad_inputs():
    x, y = make_gaussian_mixture(100, num_classes=2, dim=4, generator=seeded_generator(0))
    shards = partition_indices(torch.arange(100), 4, generator=seeded_generator(1))
    spec = ModelSpec("logistic", (4,), 2)
    ens = train_teachers(x, y, shards, spec=spec, config=CFG, generator=seeded_generator(2), accelerator="cpu")
    p1 = ens.predict_scores(x[:7], binary=True)
    assert p1.shape == (4, 7)
    with pytest.raises(ValueError, match="labels"):
        train_teachers(x, y + 5, shards, spec=spec, generator=seeded_generator(2))
    with pytest.raises(ValueError, match="teacher_indices"):
        train_teachers(x, y, shards, spec=spec, generator=seeded_generator(2), teacher_indices=[9])


def test_prediction_chunks_bound_the_widest_activation(monkeypatch):
    """Chunks of (teacher, input) pairs keep a CNN's first convolution output within the budget,
    and chunking does not change a single vote or score."""
    import pate_stab.teachers.ensemble as ensemble_module

    spec = ModelSpec("cnn", (1, 12, 12), 3, channels=(4, 6), hidden=(8,))
    assert ensemble_module.widest_activation(spec) == 4 * 12 * 12
    assert ensemble_module.widest_activation(ModelSpec("mlp", (784,), 10, hidden=(128, 32))) == 128
    assert ensemble_module.widest_activation(ModelSpec("logistic", (784,), 10)) == 10
    params = init_stacked_parameters(spec, list(range(5)))
    ens = ensemble_module.TeacherEnsemble(spec, params)
    xq = torch.randn(23, 1, 12, 12, generator=seeded_generator(4))
    whole_votes, whole_scores = ens.predict_votes(xq), ens.predict_scores(xq)
    seen = []
    real_forward = ensemble_module.stacked_forward

    def spy(base, p, x, *, shared_input):
        seen.append(next(iter(p.values())).shape[0] * x.shape[0])
        return real_forward(base, p, x, shared_input=shared_input)

    monkeypatch.setattr(ensemble_module, "stacked_forward", spy)
    monkeypatch.setattr(ensemble_module, "PREDICTION_ACTIVATION_BUDGET", 6 * 4 * 12 * 12)  # 6 pairs
    assert torch.equal(ens.predict_votes(xq), whole_votes)
    assert torch.allclose(ens.predict_scores(xq), whole_scores, rtol=0, atol=1e-6)
    assert seen and max(seen) <= 6


@pytest.mark.parametrize("mode", ["vectorized", "sequential"])
def test_progress_bar_counts_toward_the_whole_fit(capsys, mode):
    """The teachers' bar shows the total it counts toward (every step of the fit), so it has an ETA."""
    x, y, shards = _problem(n=120, k=3)
    cfg = TrainConfig(epochs=2, batch_size=8, lr=1e-2)
    _train(x, y, shards, config=cfg, mode=mode, progress_bar=True)
    sizes = [len(s) for s in shards]
    if mode == "vectorized":
        total = 2 * max(-(-n // 8) for n in sizes)
    else:
        total = sum(2 * -(-n // 8) for n in sizes)
    err = capsys.readouterr().err
    assert f"{total}/{total}" in err, err[-500:]

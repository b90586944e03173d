"""The dpsgd-cnn direct learner: DP-SGD on the private images, one spend per id, replayed, images only."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pate_stab.cli.commands import main
from pate_stab.data.own import own_data
from pate_stab.direct.cnn import CNN_DPSGD, MIN_SIDE, TanhCNN, check_opacus_compatible, cnn_dpsgd_config
from pate_stab.direct.dpsgd import DPSGDConfig, dpsgd_epsilon
from pate_stab.direct.opacus_engine import engine_schedule
from pate_stab.errors import ReplayedSpendError
from pate_stab.run import TransferConfig
from pate_stab.run.compare import run_compare
from pate_stab.run.compare_table import replace_one_equivalent
from pate_stab.run.direct import run_direct
from pate_stab.run.prepare import prepare
from pate_stab.run.report import open_ledger
from tests.run.direct_helpers import cli_refusals, spend_lines

# a few hundred records, 2 epochs: fixed for the test task (not the paper's, which needs n ≥ 512)
SMALL = DPSGDConfig(expected_batch_size=50, epochs=2, lr=1.0, momentum=0.9, max_grad_norm=1.0)
SIDE = 16


def _images(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """3 classes of 1 x 16 x 16 images: a bright band in the top, middle or bottom third, plus noise."""
    y = torch.randint(0, 3, (n,), generator=generator)
    x = 0.1 * torch.rand(n, 1, SIDE, SIDE, generator=generator)
    for k in range(3):
        rows = slice(k * SIDE // 3, (k + 1) * SIDE // 3)
        x[y == k, :, rows, :] += 0.9
    return x.clamp(0, 1), y


def _data(flat: bool = False, n: int = 400):
    g = torch.Generator().manual_seed(5)
    (px, py), (ux, uy), (ex, ey) = _images(n, g), _images(200, g), _images(200, g)
    if flat:  # the same records as feature vectors: no images
        px, ux, ex = px.flatten(1), ux.flatten(1), ex.flatten(1)
    return own_data((px, py), ux, (ex, ey), classes=3, public_y=uy)


def _config(tmp_path, name: str, **kw) -> TransferConfig:
    settings = dict(run_name=name, checkpoints_dir=str(tmp_path), dataset="arrays", num_teachers=5,
                    teacher_model="propagate", num_queries=50, accelerator="cpu", aggregator="dpsgd-cnn",
                    releaser_noise="seeded", private_size_hint=400)  # fmt: skip
    return TransferConfig(**{**settings, **kw})


def _ledger(prep, budget: float = 100.0):
    return open_ledger(prep.run_dir, run_name=prep.config.run_name, budget_epsilon=budget, budget_delta=1e-3,
                       neighbouring=prep.config.release.neighbouring)  # fmt: skip


def _spends(run_dir) -> list[dict]:
    path = run_dir / "ledger.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [r for r in map(json.loads, lines) if r.get("kind") == "spend"]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield prepare(_config(tmp_path_factory.mktemp("cnn"), "cnn"), data=_data())
    torch.set_num_threads(threads)  # the later modules run with the session's threads


def test_the_network_is_tramer_and_bonehs_and_opacus_can_train_it():
    net = TanhCNN((1, 28, 28), 10)
    # their MNIST_CNN: conv 16·1·8·8 + 16, conv 32·16·4·4 + 32, linear 512·32 + 32, linear 32·10 + 10
    assert sum(p.numel() for p in net.parameters()) == 1040 + 8224 + 16416 + 330
    assert net.classifier[0].in_features == 32 * 4 * 4
    assert [type(m).__name__ for m in net.features] == ["Conv2d", "Tanh", "MaxPool2d", "Conv2d", "Tanh", "MaxPool2d"]
    check_opacus_compatible(net)  # no BatchNorm
    with pytest.raises(ValueError, match="Opacus cannot train"):
        check_opacus_compatible(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2)))
    with pytest.raises(ValueError, match=f"at least {MIN_SIDE}"):
        TanhCNN((1, MIN_SIDE - 1, 28), 10)
    assert TanhCNN((3, MIN_SIDE, MIN_SIDE), 4)(torch.zeros(2, 3, MIN_SIDE, MIN_SIDE)).shape == (2, 4)


def test_settings_are_the_papers_per_data_set():
    assert cnn_dpsgd_config("mnist") == DPSGDConfig(512, 40, 0.5, 0.9, 0.1)
    assert cnn_dpsgd_config("fashion_mnist") == DPSGDConfig(2048, 40, 4.0, 0.9, 0.1)
    assert cnn_dpsgd_config("files") == CNN_DPSGD["mnist"]  # fixed in advance for other image data
    assert cnn_dpsgd_config("mnist", epochs=3).epochs == 3 and cnn_dpsgd_config("mnist", epochs=3).lr == 0.5
    assert engine_schedule(60000, cnn_dpsgd_config("mnist")) == (1 / 118, 118 * 40)


def test_charged_once_and_replays_its_recorded_model(prepared):
    assert prepared.teachers is None and prepared.task.private_images is not None
    with _ledger(prepared) as ledger:
        before = ledger.spent()[0]
        row = run_direct(prepared, ledger, learner="dpsgd-cnn", epsilon=8.0, repeat=1, dpsgd=SMALL)
        after = ledger.spent()[0]
        assert after - before == pytest.approx(row["epsilon"], rel=1e-12) and not row["reused"]
        assert row["student_acc"] > 0.6 and row["student_acc_unlabelled_pool"] > 0.6  # learnt (chance 1/3)
        entry = ledger.entry(row["spend_id"])
        assert entry.mechanism == "dpsgd-cnn" and entry.metadata["neighbouring"] == "add_remove"
        assert entry.metadata["input_shape"] == [1, SIDE, SIDE] and "Tram" in entry.metadata["architecture"]
        path = prepared.run_dir / "direct" / entry.result["model"]
        stored = path.read_bytes()
        again = run_direct(prepared, ledger, learner="dpsgd-cnn", epsilon=8.0, repeat=1, dpsgd=SMALL)
        assert again["reused"] and again["student_acc"] == row["student_acc"]
        assert ledger.spent()[0] == after and path.read_bytes() == stored  # no second charge, no retraining
    with _ledger(prepared) as reopened:  # a new process replays too
        third = run_direct(prepared, reopened, learner="dpsgd-cnn", epsilon=8.0, repeat=1, dpsgd=SMALL)
        assert third["reused"] and third["student_acc"] == row["student_acc"] and reopened.spent()[0] == after
        torch.save({"kind": "cnn"}, path)  # the recorded model altered: its digest no longer matches
        with pytest.raises(ReplayedSpendError, match="missing or altered"):
            run_direct(prepared, reopened, learner="dpsgd-cnn", epsilon=8.0, repeat=1, dpsgd=SMALL)
        assert reopened.spent()[0] == after


def test_epsilon_is_the_rdp_accountants_for_its_sigma_q_and_steps(prepared):
    from opacus.accountants import RDPAccountant
    from opacus.accountants.utils import get_noise_multiplier

    with _ledger(prepared) as ledger:
        row = run_direct(prepared, ledger, learner="dpsgd-cnn", epsilon=3.0, repeat=2, dpsgd=SMALL)
        model = torch.load(prepared.run_dir / "direct" / ledger.entry(row["spend_id"]).result["model"])
    s, delta = row["settings"], prepared.config.release.delta
    assert s["public_size"] == 400 and s["public_size_source"].startswith("private_size_hint")
    assert (s["sample_rate"], s["steps"]) == (1 / 8, 8 * 2) == engine_schedule(400, SMALL)  # ⌈N / 50⌉ = 8
    acc = RDPAccountant()
    acc.history = [(s["noise_multiplier"], s["sample_rate"], s["steps"])]
    assert row["epsilon"] == pytest.approx(acc.get_epsilon(delta=delta), rel=1e-12)
    assert row["epsilon"] == dpsgd_epsilon(noise_multiplier=s["noise_multiplier"], sample_rate=1 / 8, steps=16,
                                           delta=delta)  # fmt: skip
    assert model["epsilon"] == pytest.approx(row["epsilon"], rel=1e-9)  # Opacus's engine after training
    assert 2.9 < row["epsilon"] <= 3.0 and row["delta"] == delta
    sigma = get_noise_multiplier(target_epsilon=3.0, target_delta=delta, sample_rate=1 / 8, steps=16, accountant="rdp")
    assert s["noise_multiplier"] == sigma
    assert row["neighbouring"] == "add_remove"
    assert (row["epsilon_replace_one"], row["delta_replace_one"]) == replace_one_equivalent(
        epsilon=row["epsilon"], delta=delta, neighbouring="add_remove"
    )
    assert "CNN on images" in row["note"]


# slow tier: the CNN through compare repeats paths the fast tier runs: a compare with direct learners only
# (tests/run/test_direct.py::test_compare_on_neighbouring_own_data_publishes_no_private_size), the CNN in a run that
# makes no teachers and no features (test_a_transfer_with_the_cnn_is_one_spend_replayed_and_computes_no_features),
# a batch larger than N refused before any spend
# (tests/run/test_dpsgd_small_data.py::test_compare_with_a_batch_larger_than_n_is_refused_before_any_teacher).
@pytest.mark.slow
def test_a_compare_with_only_the_cnn_makes_no_teachers_and_no_features(tmp_path):
    cfg = _config(tmp_path, "cmp", aggregator="stability", features="scattering", dpsgd_cnn_epochs=1,
                  dpsgd_batch_size=512)  # fmt: skip
    # MNIST's batch asked for needs N ≥ 512: a smaller public size is refused before any spend (by default the
    # batch is at most the size rule's, pate_stab.direct.dpsgd.default_batch_size: 64 for N = 400)
    with pytest.raises(ValueError, match="expected batch size 512 exceeds the public size N=400"):
        run_compare(cfg, epsilons=[4.0], aggregators=[], direct=["dpsgd-cnn"], data=_data())
    assert _spends(cfg.run_dir) == []
    cfg = _config(tmp_path, "cmp600", aggregator="stability", features="scattering", dpsgd_cnn_epochs=1,
                  private_size_hint=600, dpsgd_batch_size=512)  # fmt: skip
    out = run_compare(cfg, epsilons=[4.0], aggregators=[], direct=["dpsgd-cnn"], data=_data(n=600))
    (row,) = out["rows"]
    assert row["aggregator"] == "dpsgd-cnn" and row["settings"]["dpsgd"] == {
        **CNN_DPSGD["mnist"].to_dict(),
        "epochs": 1,
    }
    assert (row["settings"]["sample_rate"], row["settings"]["steps"]) == (1 / 2, 2)  # ⌈N / 512⌉ = 2 batches
    assert [s["epsilon"] for s in _spends(cfg.run_dir)] == [row["epsilon"]]
    assert out["private"]["teachers"]["mean_accuracy"] is None  # no teachers were made
    assert not (cfg.run_dir / "features").exists() and not (cfg.run_dir / "teachers").exists()


def test_refused_on_feature_data_with_nothing_spent(tmp_path):
    with pytest.raises(ValueError, match="trains a CNN on images; dataset 'synthetic'"):
        TransferConfig(run_name="t", aggregator="dpsgd-cnn")
    with pytest.raises(ValueError, match="trains a CNN on images; dataset 'adult'"):
        TransferConfig(run_name="t", dataset="adult", aggregator="dpsgd-cnn", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="feature vectors or a table, not images"):  # a transfer's prepare
        prepare(_config(tmp_path, "flat_transfer"), data=_data(flat=True))
    assert not (tmp_path / "flat_transfer").exists()
    cfg = _config(tmp_path, "flat", aggregator="stability")
    prep = prepare(cfg, data=_data(flat=True), with_teachers=False, check_budget=False)
    with _ledger(prep) as ledger, pytest.raises(ValueError, match="feature vectors or a table, not images"):
        run_direct(prep, ledger, learner="dpsgd-cnn", epsilon=2.0, dpsgd=SMALL)
    assert _spends(cfg.run_dir) == []
    cmp = _config(tmp_path, "flat_cmp", aggregator="stability")
    with pytest.raises(ValueError, match="not images"):
        run_compare(cmp, epsilons=[2.0], aggregators=[], direct=["dpsgd-cnn"], data=_data(flat=True))
    assert _spends(cmp.run_dir) == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where no GPU exists")
def test_a_gpu_asked_for_without_one_is_refused_before_the_spend(tmp_path):
    cfg = _config(tmp_path, "gpu", accelerator="gpu")
    prep = prepare(cfg, data=_data())
    with _ledger(prep) as ledger, pytest.raises(ValueError, match="asks for a GPU"):
        run_direct(prep, ledger, learner="dpsgd-cnn", epsilon=2.0, dpsgd=SMALL)
    assert _spends(cfg.run_dir) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["transfer", "--aggregator", "dpsgd-cnn"], "trains a CNN on images; dataset 'synthetic'"),
        (["compare", "--aggregators", "--direct", "dpsgd-cnn"], "trains a CNN on images; dataset 'synthetic'"),
        (
            [
                "transfer",
                "--aggregator",
                "dpsgd-cnn",
                "--dataset",
                "files",
                "--private",
                "P.npz",
                "--public",
                "Q.npz",
                "--set",
                "dpsgd_cnn_epochs=0",
            ],
            "dpsgd_cnn_epochs must be a positive integer",
        ),  # fmt: skip
    ],
)
def test_cli_exits_2_on_bad_input_with_nothing_spent(tmp_path, capsys, monkeypatch, argv, message):
    # files that exist, so that the setting (checked after the files) is what the run refuses
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "P.npz", x=rng.random((20, 1, 8, 8), dtype=np.float32), y=np.arange(20) % 2)
    np.savez(tmp_path / "Q.npz", x=rng.random((10, 1, 8, 8), dtype=np.float32))
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--run-name", "bad", "--checkpoints-dir", str(tmp_path)])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert _spends(tmp_path / "bad") == []


def test_gpu_recipes_list_the_cnn_and_cpu_recipes_do_not():
    from pathlib import Path

    import yaml

    from pate_stab.run.direct import check_direct_learners

    root = Path(__file__).resolve().parents[2] / "recipes" / "configs"
    for stem, listed in (("mnist_stab_gpu", True), ("fashion_mnist_stab_gpu", True), ("mnist_stab", False),
                         ("fashion_mnist_stab", False)):  # fmt: skip
        data = yaml.safe_load((root / f"{stem}.yaml").read_text())
        config = TransferConfig.from_dict({k: v for k, v in data.items() if k != "compare"})
        direct = check_direct_learners(data["compare"]["direct"], dataset=config.data.dataset)
        assert ("dpsgd-cnn" in direct) == listed, stem
        assert (config.execution.accelerator == "gpu") == listed, stem


def test_a_transfer_with_the_cnn_is_one_spend_replayed_and_computes_no_features(tmp_path):
    from pate_stab.run.transfer import run_transfer

    cfg = _config(tmp_path, "tr", features="scattering", dpsgd_cnn_epochs=1, epsilon=2.0, private_size_hint=600)
    report = run_transfer(cfg, data=_data(n=600))
    assert report["kind"] == "direct" and report["aggregator"] == "dpsgd-cnn" and report["neighbouring"] == "add_remove"
    assert report["epsilon"] <= 2.0 and [s["epsilon"] for s in _spends(cfg.run_dir)] == [report["epsilon"]]
    assert not (cfg.run_dir / "features").exists() and not (cfg.run_dir / "teachers").exists()
    again = run_transfer(cfg, data=_data(n=600))
    assert again["row"]["reused"] and again["test_accuracy"] == report["test_accuracy"]
    assert len(_spends(cfg.run_dir)) == 1


def test_cli_exits_2_on_own_feature_files_with_nothing_spent(tmp_path, capsys):
    data = _data(flat=True)
    # with a public size given (without it, that configuration-only refusal comes first)
    errors = cli_refusals(tmp_path, (data.private_x, data.private_y), data.public_x, "dpsgd-cnn", capsys,
                          extra=("--set", "private_size_hint=400"))  # fmt: skip
    for name, err in errors.items():
        assert "feature vectors or a table, not images" in err
        assert _spends(tmp_path / name) == []
    assert not (tmp_path / "t").exists()  # a transfer refuses before the run folder is made


def test_neighbours_publish_the_same_spend_and_never_the_private_size(tmp_path):
    """Add/remove: the CNN on 413 images and on the same minus one gets the same q, steps, σ and ledger lines,
    computed from the public size N = 450; neither count appears in the ledger or the row."""
    import re

    g = torch.Generator().manual_seed(5)
    (px, py), (ux, uy), (ex, ey) = _images(413, g), _images(200, g), _images(200, g)
    rows, dirs = [], []
    for n in (413, 412):
        data = own_data((px[:n], py[:n]), ux, (ex, ey), classes=3, public_y=uy)
        cfg = _config(tmp_path / str(n), "nb", private_size_hint=450)
        prep = prepare(cfg, data=data)
        with _ledger(prep) as ledger:
            rows.append(run_direct(prep, ledger, learner="dpsgd-cnn", epsilon=4.0, dpsgd=SMALL))
        dirs.append(prep.run_dir)
    keys = ("noise_multiplier", "sample_rate", "steps", "public_size")
    assert [rows[0]["settings"][k] for k in keys] == [rows[1]["settings"][k] for k in keys]
    assert (rows[0]["settings"]["sample_rate"], rows[0]["settings"]["steps"]) == engine_schedule(450, SMALL)
    assert rows[0]["note"] == rows[1]["note"] and rows[0]["epsilon"] == rows[1]["epsilon"]
    assert spend_lines(dirs[0]) == spend_lines(dirs[1])
    for n, run_dir, row in zip((413, 412), dirs, rows, strict=True):
        text = (run_dir / "ledger.jsonl").read_text() + json.dumps(row)
        assert re.search(rf"(?<![\d.]){n}(?![\d.])", text) is None, n

"""run_transfer end to end: report fields vs the ledger, reproducibility, resume without
retraining or spending twice, label-only threat model, budget errors, baselines, query selection
(default unchanged, votes read only when released, same spend, resume)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

import pate_stab.run.data as run_data
import pate_stab.run.release as run_release
import pate_stab.teachers.registry as teacher_registry
from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.aggregation.votes import vote_histogram
from pate_stab.errors import BudgetExhaustedError, LedgerError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.privacy.noise.secure import SEEDED_NOISE_WARNING
from pate_stab.run import BudgetTooSmallError, TransferConfig, run_transfer
from pate_stab.run.prepare import prepare
from pate_stab.teachers import TeacherEnsemble

VOLATILE = ("wall_time_s", "run", "run_dir", "ledger", "resumed")


def small(tmp_path, name: str = "run", **kw) -> TransferConfig:
    base = dict(
        run_name=name, checkpoints_dir=str(tmp_path), num_teachers=300, num_private=6000, num_public=400,
        num_eval=300, separation=6.0, num_queries=100, epsilon=8.0, max_unstable=10, teacher_epochs=5, teacher_lr=0.05,
        student_epochs=3, accelerator="cpu", releaser_noise="seeded",  # these tests compare reruns' noise
    )  # fmt: skip
    base.update(kw)
    return TransferConfig(**base)


def stable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in VOLATILE}


def ledger_of(cfg: TransferConfig) -> PrivacyLedger:
    path = cfg.run_dir / "ledger.jsonl"
    return PrivacyLedger(path, run_id=cfg.run_name, budget_epsilon=cfg.epsilon, budget_delta=cfg.delta)


@pytest.fixture(scope="module")
def first(tmp_path_factory, trained_teachers):
    # the session's standard teachers (tests/run/conftest.py); test_same_seed_same_report trains its own
    cfg = trained_teachers.seed(small(tmp_path_factory.mktemp("a")))
    return cfg, run_transfer(cfg)


def test_report_fields_and_ledger_agree(first):
    cfg, report = first
    for key in (
        "dataset",
        "num_teachers",
        "teacher_model",
        "aggregator",
        "calibration",
        "epsilon",
        "delta",
        "queries",
        "label_accuracy_answered",
        "student",
        "ledger",
        "threat_model",
        "files",
    ):
        assert key in report, key  # fmt: skip
    # statistics of the private data no mechanism paid for are in the private file only
    for key in ("teachers", "wall_time_s"):
        assert key not in report, key
    assert "private" not in report["sizes"]
    diagnostics_path = cfg.run_dir / "private_diagnostics.json"
    assert diagnostics_path.stat().st_mode & 0o777 == 0o600
    diagnostics = json.loads(diagnostics_path.read_text())
    assert "NOT differentially private" in diagnostics["private"]
    assert diagnostics["sizes"]["private"] == cfg.num_private
    assert 0 <= diagnostics["teachers"]["mean_accuracy"] <= 1
    for stage in ("data", "partition", "teachers", "votes", "release", "student", "evaluation"):
        assert diagnostics["wall_time_s"][stage] >= 0
    assert "private_diagnostics.json" in report["files"]["private"]
    assert {"report.json", "ledger.jsonl", "student.pt", "config.json"} <= set(report["files"]["published"])
    for name in ("private_key", "private_identity.json"):
        assert (cfg.run_dir / name).stat().st_mode & 0o777 == 0o600, name
    q = report["queries"]
    assert q["answered"] + q["abstained"] == cfg.num_queries and q["answered"] >= 90
    assert 0 <= report["student"]["test_accuracy"] <= 1
    on_disk = json.loads((cfg.run_dir / "report.json").read_text())
    assert on_disk == report
    for name in ("config.json", "ledger.jsonl", "student.pt", "teachers/weights.pt"):
        assert (cfg.run_dir / name).is_file(), name
    with ledger_of(cfg) as ledger:
        entries = ledger.entries()
        assert [e.spend_id for e in entries] == [report["ledger"]["spend_id"]]
        assert entries[0].epsilon == report["epsilon"] <= cfg.epsilon * (1 + 1e-12)
        assert entries[0].delta == report["delta"]
        assert entries[0].mechanism == "stability_hard"
        # the stored release is what the report counts
        labels = entries[0].result["labels"]
        assert sum(v != -1 for v in labels) == q["answered"]
    assert report["ledger"]["spent_basic_composition"]["epsilon"] == report["epsilon"]


def test_same_seed_same_report(first, tmp_path):
    cfg, report = first
    again = run_transfer(replace(cfg, checkpoints_dir=str(tmp_path)))
    assert stable(again) == stable(report)
    other = run_transfer(replace(cfg, checkpoints_dir=str(tmp_path / "s1"), seed=1))
    assert stable(other) != stable(report)


def test_interrupted_after_teachers_resumes_without_retraining_or_double_spend(tmp_path, monkeypatch, first):
    _, reference = first
    cfg = small(tmp_path)
    out = run_transfer(replace(cfg, stop_after="teachers"))
    assert out["status"] == "teachers trained"
    assert (cfg.run_dir / "teachers" / "weights.pt").is_file()
    assert not (cfg.run_dir / "ledger.jsonl").exists()  # nothing spent yet

    def no_training(*args, **kwargs):
        raise AssertionError("teachers were retrained")

    monkeypatch.setattr(teacher_registry, "train_teachers", no_training)
    out = run_transfer(replace(cfg, stop_after="release"))
    assert out["status"] == "released"
    with ledger_of(cfg) as ledger:
        assert len(ledger.entries()) == 1 and ledger.entries()[0].has_result
        spent = ledger.spent()
    resumed = run_transfer(cfg)
    assert resumed["resumed"] == {"teachers": True, "release": True}
    rerun = run_transfer(cfg)  # a complete run rerun: nothing new either
    with ledger_of(cfg) as ledger:
        assert len(ledger.entries()) == 1
        assert ledger.spent() == spent
    assert stable(resumed) == stable(rerun) == stable(reference)


def test_changed_student_settings_refit_only_the_student(tmp_path, monkeypatch, trained_teachers):
    """The student is post-processing: new student settings reuse teachers and releases, spend nothing."""
    cfg = trained_teachers.seed(small(tmp_path))
    first_report = run_transfer(cfg)
    with ledger_of(cfg) as ledger:
        entries, spent = ledger.entries(), ledger.spent()

    def no_training(*args, **kwargs):
        raise AssertionError("teachers were retrained")

    monkeypatch.setattr(teacher_registry, "train_teachers", no_training)
    changed = replace(cfg, student_epochs=1, student_hidden=(8,), bottom="random")
    report = run_transfer(changed)
    assert report["resumed"] == {"teachers": True, "release": True}
    with ledger_of(cfg) as ledger:
        assert ledger.entries() == entries and ledger.spent() == spent
    assert report["queries"] == first_report["queries"]
    assert report["label_accuracy_answered"] == first_report["label_accuracy_answered"]
    saved = json.loads((cfg.run_dir / "config.json").read_text())
    assert saved["student_epochs"] == 1 and saved["bottom"] == "random"
    assert json.loads((cfg.run_dir / "report.json").read_text())["student"] == report["student"]
    assert report["student"]["config"]["epochs"] == 1 and report["student"]["model"]["hidden"] == [8]
    assert report["student"]["bottom"] == "random"


def test_changed_config_in_same_run_dir_is_refused(first):
    cfg, _ = first
    with pytest.raises(ValueError, match="another configuration"):
        run_transfer(replace(cfg, num_teachers=301))


def test_changed_data_in_same_run_dir_is_refused(first, monkeypatch):
    """The run's identity includes its data (a MAC in a private file), not config.json alone."""
    cfg, _ = first
    raw_splits = run_data._raw_splits

    def one_record_less(config, generator):  # the data as loaded lose their first private record
        (px, py, ux, uy, ex, ey), num_classes = raw_splits(config, generator)
        return (px[1:], py[1:], ux, uy, ex, ey), num_classes

    monkeypatch.setattr(run_data, "_raw_splits", one_record_less)
    with pytest.raises(ValueError, match="made with other data"):
        run_transfer(cfg)
    mac = json.loads((cfg.run_dir / "private_identity.json").read_text())["data_mac"]
    key = (cfg.run_dir / "private_key").read_bytes().hex()
    for public in ("config.json", "report.json", "ledger.jsonl"):
        text = (cfg.run_dir / public).read_text()
        assert mac not in text and key not in text, public


def test_budget_too_small_fails_before_training(tmp_path):
    cfg = small(tmp_path, epsilon=1.0)
    with pytest.raises(BudgetTooSmallError, match=r"needs about k=\d+ teachers.*you have k=300.*ε ≥"):
        run_transfer(cfg)
    assert not (cfg.run_dir / "teachers").exists()


def test_label_only_threat_model(tmp_path):
    cfg = small(tmp_path, threat_model="label-only", label_only_share=0.1, num_public=0)
    report = run_transfer(cfg)
    assert report["threat_model"]["name"] == "label-only"
    assert "only labels are private" in report["threat_model"]["description"]
    pool = report["sizes"]["public_pool"]
    assert report["sizes"]["evaluation"] == 300 and 450 < pool < 750  # binomial(6000, 0.1): 600 ± 4.9 sd
    private = json.loads((cfg.run_dir / "private_diagnostics.json").read_text())["sizes"]["private"]
    assert private + pool == 6000


def test_label_only_pool_membership_is_per_record():
    """Removing one training record moves no other record between the pool and the teachers
    (a random permutation of the rows, as before, moves most of them)."""
    from pate_stab.run.data import load_task

    cfg = TransferConfig(threat_model="label-only", num_private=600, num_public=0, num_eval=50, num_teachers=10)
    full = load_task(cfg, generator=torch.Generator().manual_seed(3))
    x = torch.cat([full.private_x, full.public_x])
    original = run_data._raw_splits

    def without_one(config, generator):
        (px, py, ux, uy, ex, ey), c = original(config, generator)
        keep = torch.arange(px.shape[0]) != 17
        return [px[keep], py[keep], ux, uy, ex, ey], c

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_data, "_raw_splits", without_one)
        neighbour = load_task(cfg, generator=torch.Generator().manual_seed(3))
    rows = {tuple(r.tolist()) for r in x}
    removed = rows - {tuple(r.tolist()) for r in torch.cat([neighbour.private_x, neighbour.public_x])}
    assert len(removed) == 1
    pool = {tuple(r.tolist()) for r in full.public_x} - removed
    assert pool == {tuple(r.tolist()) for r in neighbour.public_x}
    teachers = {tuple(r.tolist()) for r in full.private_x} - removed
    assert teachers == {tuple(r.tolist()) for r in neighbour.private_x}


@pytest.mark.parametrize("aggregator", ["gnmax", "confident-gnmax"])
def test_baseline_aggregators_spend_through_the_ledger(tmp_path, aggregator, trained_teachers):
    cfg = trained_teachers.seed(small(tmp_path, aggregator=aggregator, epsilon=2.0, student_epochs=2))
    report = run_transfer(cfg)
    with ledger_of(cfg) as ledger:
        (entry,) = ledger.entries()
    assert entry.epsilon == report["epsilon"] <= 2.0 * (1 + 1e-9)
    assert report["queries"]["seen"] == cfg.num_queries


def test_soft_label_releaser_on_a_binary_task(tmp_path):
    cfg = small(tmp_path, aggregator="stability-soft", num_classes=2, gamma=0.1, num_teachers=600,
                num_private=12000, student_epochs=2)  # fmt: skip
    report = run_transfer(cfg)
    assert report["queries"]["answered"] > 0
    assert report["label_accuracy_answered"] > 0.9
    assert report["calibration"]["soft_labels"] is True


def test_secure_releaser_noise_end_to_end(tmp_path, first, trained_teachers):
    """releaser_noise="secure": exact discrete Laplace from the OS, recorded in the ledger, replayed on rerun."""
    cfg = trained_teachers.seed(small(tmp_path, releaser_noise="secure"))
    report = run_transfer(cfg)
    with ledger_of(cfg) as ledger:
        (entry,) = ledger.entries()
        spent = ledger.spent()
    assert entry.metadata["noise"] == "secure"
    assert isinstance(entry.metadata["threshold"], int)  # the integer threshold actually used
    assert "/" in entry.metadata["noise_scale_exact"]  # the exact rational λ' >= λ
    assert entry.epsilon <= cfg.epsilon and entry.delta <= cfg.delta
    assert report["noise"] == {key: entry.metadata[key] for key in ("noise", "threshold", "noise_scale_exact")}
    _, seeded = first  # same teachers and queries, seeded noise: both answer the easy synthetic queries
    assert seeded["noise"] == {"noise": "seeded", "warning": SEEDED_NOISE_WARNING}
    assert report["queries"]["answered"] > 0.8 * seeded["queries"]["answered"]
    assert report["label_accuracy_answered"] > 0.9
    again = run_transfer(cfg)  # OS randomness cannot be redrawn: the rerun replays the recorded labels
    assert again["resumed"]["release"] is True
    assert again["queries"] == report["queries"]
    with ledger_of(cfg) as ledger:
        assert len(ledger.entries()) == 1 and ledger.spent() == spent


def test_releaser_noise_is_checked(tmp_path):
    with pytest.raises(ValueError, match="releaser_noise must be one of secure, seeded"):
        small(tmp_path, releaser_noise="os")


@pytest.mark.parametrize("aggregator", ["lnmax", "gnmax", "confident-gnmax"])
def test_default_noise_is_not_fixed_by_the_published_seed(tmp_path, aggregator):
    """Two runs with the default settings and the same seed (config.json publishes it) draw different noise.

    At ε = 0.05 over 100 queries the noise decides most labels, so equal labels would mean equal noise.
    """
    cfg = TransferConfig(
        run_name="a", checkpoints_dir=str(tmp_path), num_teachers=40, num_private=800, num_public=150, num_eval=50,
        num_queries=100, epsilon=0.05, teacher_epochs=1, aggregator=aggregator, stop_after="release",
        accelerator="cpu",
    )  # fmt: skip
    assert cfg.releaser_noise == "secure"
    labels = []
    for name in ("a", "b"):
        run_transfer(replace(cfg, run_name=name))
        with ledger_of(replace(cfg, run_name=name)) as ledger:
            (entry,) = ledger.entries()
            assert entry.metadata["noise"] == "secure" and "noise_warning" not in entry.metadata
            labels.append(entry.result["labels"])
    assert json.loads((tmp_path / "a" / "config.json").read_text())["seed"] == 0
    assert labels[0] != labels[1]


def test_rerun_with_the_other_noise_mode_is_refused(tmp_path):
    """The noise mode is part of the run's identity; a folder made before the default changed was seeded."""
    cfg = small(tmp_path, num_teachers=40, num_private=800, num_public=150, num_eval=50, stop_after="teachers",
                teacher_epochs=1, aggregator="gnmax")  # fmt: skip
    run_transfer(cfg)  # seeded
    with pytest.raises(ValueError, match="releaser_noise"):
        run_transfer(replace(cfg, releaser_noise="secure"))
    saved = json.loads((cfg.run_dir / "config.json").read_text())
    del saved["releaser_noise"]  # a run folder written before the field existed
    (cfg.run_dir / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="releaser_noise"):
        run_transfer(replace(cfg, releaser_noise="secure"))
    assert run_transfer(cfg)["status"] == "teachers trained"


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("teacher_channels", (8,), "teacher_channels must be two positive integers"),
        ("student_channels", (8, 0), "student_channels must be two positive integers"),
        ("teacher_hidden", (0,), "teacher_hidden must be positive integers"),
    ],
)
def test_model_widths_are_checked(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        small(tmp_path, **{field: value})


def test_cnn_widths_reach_the_teachers_and_the_student(tmp_path, monkeypatch):
    """teacher_channels / student_channels are the convolution widths of the specs actually built."""
    built = []
    real = teacher_registry.ModelSpec

    def spy(*args, **kwargs):
        spec = real(*args, **kwargs)
        built.append(spec)
        return spec

    monkeypatch.setattr(teacher_registry, "ModelSpec", spy)
    cfg = small(tmp_path, teacher_model="mlp", teacher_channels=(3, 5), student_channels=(7, 9),
                stop_after="release")  # fmt: skip
    run_transfer(cfg)
    assert built[0].channels == (3, 5)
    assert json.loads((cfg.run_dir / "config.json").read_text())["student_channels"] == [7, 9]


# --------------------------------------------------------------------------- query selection

SELECT = dict(query_selection="student-confidence", selection_round_size=20)


def test_default_selection_releases_the_first_queries_in_one_batch(first):
    """query_selection="first": the labels are those of one releaser run on the first m pool points."""
    cfg, report = first
    assert cfg.query_selection == "first" and report["query_selection"]["strategy"] == "first"
    assert report["query_selection"]["offered"] == cfg.num_queries
    prep = prepare(cfg)  # same seed: same split and release generator; teachers reloaded
    counts = vote_histogram(prep.teachers.predict_votes(prep.task.public_x[: cfg.num_queries]), prep.task.num_classes)
    cal = calibrate(epsilon=cfg.epsilon, delta=cfg.delta, num_queries=cfg.num_queries,
                    max_unstable=cfg.max_unstable, mode=cfg.calibration)  # fmt: skip
    expected = StabilityReleaser(cal, generator=prep.generators["release"], noise="seeded").release(counts).labels
    with ledger_of(cfg) as ledger:
        (entry,) = ledger.entries()
    assert entry.result["labels"] == expected.tolist()
    assert "index" not in entry.result["selection"]


@pytest.fixture(scope="module")
def selected(tmp_path_factory, trained_teachers):
    """A selection run stopped after its release, with every teacher vote and every release call
    recorded, then resumed with selection disabled (a resume must replay the ledger)."""
    cfg = trained_teachers.seed(small(tmp_path_factory.mktemp("sel"), "sel", **SELECT))
    events: list[tuple] = []
    real_votes, real_release = TeacherEnsemble.predict_votes, StabilityReleaser.release

    def spy_votes(self, x, **kwargs):
        out = real_votes(self, x, **kwargs)
        events.append(("votes", x.clone(), out))
        return out

    def spy_release(self, counts, **kwargs):
        events.append(("release", counts.clone()))
        return real_release(self, counts, **kwargs)

    def refuse(*args, **kwargs):
        raise AssertionError("called on resume")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TeacherEnsemble, "predict_votes", spy_votes)
        mp.setattr(TeacherEnsemble, "predict_scores", refuse)
        mp.setattr(StabilityReleaser, "release", spy_release)
        assert run_transfer(replace(cfg, stop_after="release"))["status"] == "released"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(run_release, "release_in_adaptive_batches", refuse)
        report = run_transfer(cfg)
    return cfg, events, report


def test_selection_reads_votes_only_of_points_the_releaser_processes_next(selected):
    cfg, events, report = selected
    prep = prepare(cfg)
    position = {tuple(row): i for i, row in enumerate(prep.task.public_x.tolist())}
    kinds = [e[0] for e in events]
    assert kinds == ["votes", "release"] * (len(events) // 2) and len(events) >= 4  # ≥ 2 rounds
    queried: list[int] = []
    for (_, x, votes), (_, counts) in zip(events[::2], events[1::2], strict=True):
        rows = [position[tuple(r)] for r in x.tolist()]  # pool points only
        assert not set(rows) & set(queried)  # each point's votes computed once
        assert torch.equal(counts, vote_histogram(votes, prep.task.num_classes))  # and released at once
        queried += rows
    with ledger_of(cfg) as ledger:
        (entry,) = ledger.entries()
    assert queried == entry.result["selection"]["index"] and len(queried) <= cfg.num_queries
    rounds = report["query_selection"]["rounds"]
    assert [r["size"] for r in rounds] == [len(x) for _, x, _ in events[::2]]
    assert rounds[0]["criterion"] == "k-means representatives" and rounds[1]["criterion"] == "confidence per class"


def test_selection_spends_exactly_what_the_default_spends(selected, first):
    (cfg, _, report), (cfg0, report0) = selected, first
    with ledger_of(cfg) as ledger, ledger_of(cfg0) as ledger0:
        (entry,), (entry0,) = ledger.entries(), ledger0.entries()
    assert (entry.epsilon, entry.delta, entry.mechanism, entry.event, entry.metadata) == (
        entry0.epsilon, entry0.delta, entry0.mechanism, entry0.event, entry0.metadata
    )  # fmt: skip
    assert report["epsilon"] == report0["epsilon"] and report["delta"] == report0["delta"]


def test_selection_resume_replays_the_ledger_and_matches_an_uninterrupted_run(selected, tmp_path, trained_teachers):
    cfg, _, resumed = selected
    assert resumed["resumed"] == {"teachers": True, "release": True}
    with ledger_of(cfg) as ledger:
        assert len(ledger.entries()) == 1
    q = resumed["queries"]
    assert resumed["student"]["trained_on"] == q["answered"] and q["answered"] + q["abstained"] <= cfg.num_queries
    assert resumed["query_selection"]["strategy"] == "student-confidence"
    assert "post-processing" in resumed["query_selection"]["privacy"]
    fresh = run_transfer(trained_teachers.seed(replace(cfg, checkpoints_dir=str(tmp_path))))
    assert stable(fresh) == stable(resumed)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("query_selection", "random", "query_selection must be one of first, student-confidence, spread, got 'random'"),
        ("selection_round_size", 0, "selection_round_size must be a positive integer"),
    ],
)
def test_bad_selection_values(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        small(tmp_path, **{field: value})


@pytest.mark.parametrize("aggregator", ["stability", "gnmax"])
def test_crash_between_release_and_result_replays_without_drawing(tmp_path, monkeypatch, aggregator, trained_teachers):
    """Audit defect D1: a spend recorded without its result must not buy a second draw of noise."""
    from pate_stab.privacy.mechanisms.sparse_vector import SparseVector

    cfg = trained_teachers.seed(small(tmp_path, aggregator=aggregator, releaser_noise="secure", stop_after="release"))

    def crash(self, spend_id, payload):
        raise RuntimeError("simulated crash after the release, before record_result")

    monkeypatch.setattr(PrivacyLedger, "record_result", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_transfer(cfg)
    monkeypatch.undo()
    with ledger_of(cfg) as ledger:
        (entry,) = ledger.entries()
        assert not entry.has_result and len(entry.outputs) == 1  # paid, and what it bought is on disk
        first_labels = entry.outputs[0]["labels"]
        spent = ledger.spent()

    draws = []
    real_process = SparseVector.process_many

    def counting_process(self, *args, **kwargs):
        draws.append("svt")
        return real_process(self, *args, **kwargs)

    monkeypatch.setattr(SparseVector, "process_many", counting_process)
    monkeypatch.setattr(
        "pate_stab.aggregation.baselines.gaussian", lambda *a, **k: draws.append("gauss") or torch.zeros(a[1])
    )
    resumed = run_transfer(replace(cfg, stop_after=None))
    assert draws == []  # replayed: no noise drawn at all
    assert resumed["resumed"]["release"] is False  # the release call itself replayed the recorded outputs
    with ledger_of(cfg) as ledger:
        (entry,) = ledger.entries()
        assert entry.has_result and entry.result["labels"] == first_labels
        assert ledger.spent() == spent


def test_a_budget_cap_below_the_runs_epsilon_is_refused_before_training(tmp_path):
    cfg = small(tmp_path, budget_epsilon=4.0)
    with pytest.raises(BudgetExhaustedError, match=r"cap is \(epsilon=4.*needs \(epsilon=8.*new run folder"):
        run_transfer(cfg)
    assert not cfg.run_dir.exists()  # nothing trained, no ledger


def test_transfers_budget_cap_is_recorded_lowered_and_never_raised(tmp_path):
    cfg = small(tmp_path, "cap", teacher_model="propagate", num_teachers=20, num_private=1000, aggregator="gnmax",
                num_queries=20, student_epochs=1, budget_epsilon=10.0)  # fmt: skip
    report = run_transfer(cfg)
    assert report["ledger"]["budget"]["epsilon"] == 10.0
    before = (cfg.run_dir / "ledger.jsonl").read_bytes()
    with pytest.raises(LedgerError, match="can only be lowered, never raised"):
        run_transfer(replace(cfg, budget_epsilon=12.0))
    with pytest.raises(LedgerError, match="already spent"):
        run_transfer(replace(cfg, budget_epsilon=7.0))
    assert (cfg.run_dir / "ledger.jsonl").read_bytes() == before
    again = run_transfer(replace(cfg, budget_epsilon=9.0))  # lowered; the release replays
    assert again["resumed"]["release"] and again["ledger"]["budget"]["epsilon"] == 9.0
    records = [json.loads(line) for line in (cfg.run_dir / "ledger.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["change"], r["budget_epsilon"]) for r in records if r["kind"] == "budget"] == [
        ("budget", "lower", 9.0)
    ]
    assert run_transfer(replace(cfg, budget_epsilon=None))["ledger"]["budget"]["epsilon"] == 9.0  # kept


def _last_bits_moved(monkeypatch) -> None:
    """Every PCA feature one float32 step up: a preprocessing run with other kernels (threads, device)."""
    from pate_stab.features.pca import PublicFeatures

    transform = PublicFeatures.transform
    monkeypatch.setattr(
        PublicFeatures, "transform", lambda self, x: torch.nextafter(transform(self, x), torch.tensor(float("inf")))
    )


def test_a_rerun_on_the_same_data_is_accepted_when_preprocessing_moves_last_bits(tmp_path, monkeypatch):
    """The identity reads the splits as loaded: PCA's last bits depend on the thread count and the device."""
    cfg = small(tmp_path, num_teachers=200, num_private=2000, features="pca", pca_dim=5, stop_after="teachers")
    run_transfer(cfg)
    assert json.loads((cfg.run_dir / "private_identity.json").read_text())["identity"] == "splits as loaded"
    with monkeypatch.context() as m:
        _last_bits_moved(m)
        run_transfer(cfg)  # the same data, other last bits of its features: accepted
    raw_splits = run_data._raw_splits

    def one_label_changed(config, generator):
        (px, py, ux, uy, ex, ey), num_classes = raw_splits(config, generator)
        py = py.clone()
        py[0] = (py[0] + 1) % config.data.num_classes
        return (px, py, ux, uy, ex, ey), num_classes

    monkeypatch.setattr(run_data, "_raw_splits", one_label_changed)
    with pytest.raises(ValueError, match="made with other data"):
        run_transfer(cfg)


def test_a_folder_identified_by_its_preprocessed_splits_is_checked_on_them_then_upgraded(tmp_path, monkeypatch):
    from pate_stab.privacy.ledger.private_files import keyed_digest, run_private_key, tensor_bytes

    cfg = small(tmp_path, num_teachers=200, num_private=2000, features="pca", pca_dim=5, stop_after="teachers")
    run_transfer(cfg)
    path = cfg.run_dir / "private_identity.json"
    task = prepare(cfg, check_budget=False, with_teachers=False).task
    splits = [task.private_x, task.private_y, task.public_x, task.public_y, task.eval_x, task.eval_y]
    legacy_mac = keyed_digest(run_private_key(cfg.run_dir), *(tensor_bytes(t) for t in splits))
    path.write_text(json.dumps({"data_mac": legacy_mac, "mac": "HMAC-SHA256 under private_key of the run's splits"}))
    run_transfer(cfg)  # the old record matches the preprocessed splits: accepted, and upgraded
    record = json.loads(path.read_text())
    assert record["identity"] == "splits as loaded" and record["data_mac"] != legacy_mac
    path.write_text(json.dumps({"data_mac": "0" * 64, "mac": "HMAC-SHA256 under private_key of the run's splits"}))
    with pytest.raises(ValueError, match="made with other data"):
        run_transfer(cfg)

"""Direct learners as compare rows: one spend per id, the model replayed, bad input refused before any spend."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from pate_stab.cli.commands import main
from pate_stab.direct.dpsgd import DPSGDConfig, dpsgd_epsilon
from pate_stab.direct.learners import HEAD_LAMBDA
from pate_stab.direct.registry import DIRECT_LEARNERS
from pate_stab.errors import ReplayedSpendError
from pate_stab.run import TransferConfig
from pate_stab.run.compare_table import replace_one_equivalent
from pate_stab.run.config import LABEL_DIRECT_LEARNERS
from pate_stab.run.direct import direct_legend, run_direct
from pate_stab.run.prepare import prepare
from pate_stab.run.release import release_spend_id
from pate_stab.run.report import open_ledger
from tests.run.direct_helpers import cli_refusals, spend_lines

SMALL_DPSGD = DPSGDConfig(expected_batch_size=256, epochs=5, lr=2.0, momentum=0.9, max_grad_norm=1.0)


def _config(tmp_path, name="direct"):
    return TransferConfig(
        run_name=name, checkpoints_dir=str(tmp_path), num_private=3000, num_public=400, num_eval=300, dim=6,
        num_classes=3, separation=6.0, num_teachers=5, teacher_model="propagate", graph_pca_dim=None,
        num_queries=50, accelerator="cpu",
    )  # fmt: skip


def _ledger(prep, budget=100.0):
    return open_ledger(prep.run_dir, run_name=prep.config.run_name, budget_epsilon=budget, budget_delta=1e-3,
                       neighbouring=prep.config.release.neighbouring)  # fmt: skip


def _neighbour_rows(prepared, tmp_path, **kwargs):
    """``run_direct`` on D (2,990 private records) and D minus its last record, each in its own run
    folder and ledger: the two rows and the two folders."""
    rows, dirs = [], []
    for n in (2990, 2989):
        task = dataclasses.replace(prepared.task, private_x=prepared.task.private_x[:n],
                                   private_y=prepared.task.private_y[:n])  # fmt: skip
        prep = dataclasses.replace(prepared, task=task, run_dir=tmp_path / str(n))
        prep.run_dir.mkdir()
        with _ledger(prep) as ledger:
            rows.append(run_direct(prep, ledger, **kwargs))
        dirs.append(prep.run_dir)
    return rows, dirs


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return prepare(_config(tmp_path_factory.mktemp("direct")), check_budget=False)


# the CNN: test_direct_cnn.py; the label-DP learners (label privacy only): test_direct_label_dp.py
@pytest.mark.parametrize("learner", [n for n in DIRECT_LEARNERS if n != "dpsgd-cnn" and n not in LABEL_DIRECT_LEARNERS])
def test_each_learner_is_charged_once_and_replays_its_model(prepared, learner):
    with _ledger(prepared) as ledger:
        before = ledger.spent()[0]
        row = run_direct(prepared, ledger, learner=learner, epsilon=4.0, repeat=7, dpsgd=SMALL_DPSGD)
        after = ledger.spent()[0]
        assert after - before == pytest.approx(row["epsilon"], rel=1e-12)
        assert not row["reused"] and row["student_acc"] > 0.6  # a separable task, learnt
        entry = ledger.entry(row["spend_id"])
        assert entry.mechanism == learner and entry.metadata["neighbouring"] == row["neighbouring"]
        path = prepared.run_dir / "direct" / entry.result["model"]
        stored = path.read_bytes()
        again = run_direct(prepared, ledger, learner=learner, epsilon=4.0, repeat=7, dpsgd=SMALL_DPSGD)
        assert again["reused"] and again["student_acc"] == row["student_acc"]
        assert ledger.spent()[0] == after and path.read_bytes() == stored  # no second charge, no retraining
    with _ledger(prepared) as reopened:  # a rerun (new process) replays too
        third = run_direct(prepared, reopened, learner=learner, epsilon=4.0, repeat=7, dpsgd=SMALL_DPSGD)
        assert third["reused"] and third["student_acc"] == row["student_acc"] and reopened.spent()[0] == after


def test_relations_and_dpsgd_epsilon_is_the_accountants(prepared):
    with _ledger(prepared) as ledger:
        row = run_direct(prepared, ledger, learner="dpsgd-linear", epsilon=2.0, repeat=8, dpsgd=SMALL_DPSGD)
        head = run_direct(prepared, ledger, learner="output-softmax", epsilon=2.0, repeat=8)
        assert ledger.entry(head["spend_id"]).relation == "add_remove"  # the run's: one relation per ledger
    s = row["settings"]
    assert row["neighbouring"] == "add_remove" and head["neighbouring"] == "add_remove"
    assert row["epsilon"] == dpsgd_epsilon(noise_multiplier=s["noise_multiplier"], sample_rate=s["sample_rate"],
                                           steps=s["steps"], delta=prepared.config.release.delta)  # fmt: skip
    assert row["epsilon"] <= 2.0 and row["delta"] == prepared.config.release.delta
    assert (row["epsilon_replace_one"], row["delta_replace_one"]) == replace_one_equivalent(
        epsilon=row["epsilon"], delta=row["delta"], neighbouring="add_remove"
    )
    assert (head["epsilon_replace_one"], head["delta_replace_one"]) == (2.0, 0.0)  # a head's ε holds under both
    assert head["settings"]["feature_bound_source"].startswith("public pool")
    legend = direct_legend([row, head], run_neighbouring="add_remove")
    assert "2 add/remove rows" in legend
    assert f"ε = {row['epsilon_replace_one'] + 2.0:.4g}" in legend


def test_each_direct_spend_records_what_it_did_as_an_event(prepared):
    """DP-SGD records its sampled-Gaussian steps, the heads their pure-DP heads (one-vs-rest: C at ε/C)."""
    from pate_stab.privacy.accounting.composition import implies_guarantee
    from pate_stab.privacy.accounting.events import PureDpEvent, SampledGaussianEvent, SelfComposedEvent

    with _ledger(prepared) as ledger:
        rows = {n: run_direct(prepared, ledger, learner=n, epsilon=2.0, repeat=12, dpsgd=SMALL_DPSGD)
                for n in ("dpsgd-linear", "output-softmax", "output-ovr")}  # fmt: skip
        events = {n: ledger.entry(r["spend_id"]).event for n, r in rows.items()}
    s = rows["dpsgd-linear"]["settings"]
    assert events["dpsgd-linear"] == SampledGaussianEvent(
        noise_multiplier=s["noise_multiplier"], sampling_rate=s["sample_rate"], steps=s["steps"]
    )
    dpsgd = rows["dpsgd-linear"]
    assert implies_guarantee(events["dpsgd-linear"], epsilon=dpsgd["epsilon"], delta=prepared.config.release.delta)
    assert events["output-softmax"] == PureDpEvent(2.0)
    c = prepared.task.num_classes
    assert events["output-ovr"] == SelfComposedEvent(PureDpEvent(2.0 / c), c)


def test_a_replace_one_run_counts_dpsgd_by_group_privacy_and_the_heads_as_they_are(prepared, tmp_path):
    """One relation per ledger: in a replace-one run the heads spend under replace-one and DP-SGD's add/remove
    (ε, δ) is counted as (2ε, (1 + e^ε)δ); the total is a replace-one guarantee."""
    config = dataclasses.replace(prepared.config, neighbouring="replace_one")
    prep = dataclasses.replace(prepared, config=config, run_dir=tmp_path / "r1")
    prep.run_dir.mkdir()
    with _ledger(prep) as ledger:
        row = run_direct(prep, ledger, learner="dpsgd-linear", epsilon=2.0, dpsgd=SMALL_DPSGD)
        head = run_direct(prep, ledger, learner="objective-softmax", epsilon=2.0)
        assert ledger.neighbouring == "replace_one" and head["neighbouring"] == "replace_one"
        dp = ledger.entry(row["spend_id"])
        assert dp.relation == "add_remove" and dp.declared == (row["epsilon"], row["delta"])
        assert ledger.spent() == (
            pytest.approx(2 * row["epsilon"] + 2.0, rel=1e-12),
            pytest.approx((1 + math.exp(row["epsilon"])) * row["delta"], rel=1e-12),
        )


@pytest.mark.parametrize("learner", ["output-softmax", "objective-softmax", "output-ovr", "objective-ovr"])
def test_convex_heads_calibrate_on_the_public_size_not_the_private_count(prepared, tmp_path, monkeypatch, learner):
    """On D (2,990 records) and D minus one record, the heads' noise is calibrated on the public N = 3,000
    (λ'·n = λN in the (1/n)-normalised solvers), their spends are the same, and neither count is published."""
    import pate_stab.direct.learners as direct

    seen: list[float] = []
    name = {"output-softmax": "softmax_output_perturbation", "objective-softmax": "softmax_objective_perturbation",
            "output-ovr": "output_perturbation", "objective-ovr": "objective_perturbation"}[learner]  # fmt: skip
    original = getattr(direct, name)

    def spy(x, *args, lam, **kwargs):
        seen.append(lam * x.shape[0])
        return original(x, *args, lam=lam, **kwargs)

    monkeypatch.setattr(direct, name, spy)
    rows, dirs = _neighbour_rows(prepared, tmp_path, learner=learner, epsilon=2.0)
    assert seen and all(v == pytest.approx(HEAD_LAMBDA * 3000, rel=1e-12) for v in seen)
    assert rows[0]["settings"]["public_size"] == 3000 and rows[0]["neighbouring"] == "add_remove"
    assert rows[0]["settings"] == rows[1]["settings"] and spend_lines(dirs[0]) == spend_lines(dirs[1])
    for n, run_dir, row in zip((2990, 2989), dirs, rows, strict=True):
        assert not _mentions(_published_text(run_dir) + json.dumps(row), n), n


def _finest_power_of_two(w: torch.Tensor) -> float:
    """The largest power of two that divides every entry of ``w`` exactly (as doubles)."""
    exponents = []
    for value in w.double().flatten().tolist():
        if value != 0.0:
            mantissa, exponent = math.frexp(value)
            bits = int(abs(mantissa) * 2**53)  # exact: a double's mantissa has 53 bits
            exponents.append(exponent - 53 + (bits & -bits).bit_length() - 1)
    return 2.0 ** min(exponents)


def test_each_row_states_its_noise_and_output_heads_publish_lattice_points(prepared):
    """Output perturbation draws exact lattice noise: its weights are multiples of one coarse power of
    two (float noise leaves bits down to 2^-50 and below); the other learners draw float noise and
    their rows say so."""
    learners = ("output-softmax", "output-ovr", "objective-ovr", "dpsgd-linear")
    with _ledger(prepared) as ledger:
        rows = {n: run_direct(prepared, ledger, learner=n, epsilon=3.0, repeat=11, dpsgd=SMALL_DPSGD) for n in learners}
        for name in ("output-softmax", "output-ovr"):
            model = torch.load(prepared.run_dir / "direct" / ledger.entry(rows[name]["spend_id"]).result["model"])
            assert _finest_power_of_two(model["weight"]) >= 2.0**-30, name
            assert "exact lattice Laplace noise" in rows[name]["note"]
            assert rows[name]["settings"]["noise_kind"].startswith("exact")
    assert "floating-point l2-Laplace noise" in rows["objective-ovr"]["note"]
    assert rows["objective-ovr"]["settings"]["noise_kind"].startswith("floating point")
    assert "floating-point Gaussian noise in Opacus's secure mode" in rows["dpsgd-linear"]["note"]
    assert rows["dpsgd-linear"]["settings"]["secure_mode"] is True  # a secure run


def test_a_spend_without_its_model_is_refused_not_retrained(prepared):
    with _ledger(prepared) as ledger:
        spend_id = release_spend_id(prepared.config.run_name, "objective-softmax", 3.0, 9)
        ledger.spend(spend_id, epsilon=3.0, delta=0.0, mechanism="objective-softmax")  # crashed before the model
        spent = ledger.spent()
        with pytest.raises(ReplayedSpendError, match="nothing is trained again"):
            run_direct(prepared, ledger, learner="objective-softmax", epsilon=3.0, repeat=9)
        assert ledger.spent() == spent
        assert not list((prepared.run_dir / "direct").glob("*rep-9*"))


def test_an_altered_model_file_is_refused(prepared):
    with _ledger(prepared) as ledger:
        row = run_direct(prepared, ledger, learner="output-softmax", epsilon=5.0, repeat=10)
        path = prepared.run_dir / "direct" / ledger.entry(row["spend_id"]).result["model"]
        torch.save({"weight": torch.zeros(3, 6)}, path)
        with pytest.raises(ReplayedSpendError, match="missing or altered"):
            run_direct(prepared, ledger, learner="output-softmax", epsilon=5.0, repeat=10)


@pytest.mark.parametrize("bad", ["nan", "label", "epsilon0", "epsilon_negative", "unknown"])
def test_bad_input_is_refused_with_nothing_spent(prepared, bad):
    task = prepared.task
    if bad == "nan":
        x = task.private_x.clone()
        x[5, 2] = float("nan")
        task = dataclasses.replace(task, private_x=x)
    if bad == "label":
        y = task.private_y.clone()
        y[0] = task.num_classes
        task = dataclasses.replace(task, private_y=y)
    prep = dataclasses.replace(prepared, task=task)
    eps = {"epsilon0": 0.0, "epsilon_negative": -1.0}.get(bad, 1.0)
    learner = "bogus" if bad == "unknown" else "dpsgd-linear"
    with _ledger(prepared) as ledger:
        spent = ledger.spent()
        with pytest.raises(ValueError, match="NaN|labels must lie|epsilon|unknown direct"):
            run_direct(prep, ledger, learner=learner, epsilon=eps, repeat=11, dpsgd=SMALL_DPSGD)
        assert ledger.spent() == spent
        assert ledger.entry(f"{prepared.config.run_name}:{learner}:eps={eps:g}:rep=11") is None


@pytest.mark.parametrize("args", [["--direct", "output-softmax", "--epsilons", "0"], ["--direct", "bogus"],
                                  ["--direct", "output-softmax", "--epsilons", "-2"]])  # fmt: skip
def test_cli_exits_2_with_nothing_spent(tmp_path, args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--run-name", "bad", "--checkpoints-dir", str(tmp_path), "--set", "num_private=3000",
              "--teacher-model", "propagate", "--num-teachers", "5", "--aggregators", *args])  # fmt: skip
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "epsilons must be positive" in err or "unknown direct learners ['bogus']" in err, err
    ledger = tmp_path / "bad" / "ledger.jsonl"
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    assert all(json.loads(line).get("kind") != "spend" for line in lines)


def test_compare_direct_rows_beside_aggregators(tmp_path):
    cfg = _config(tmp_path, "cmp")
    from pate_stab.run.compare import run_compare

    out = run_compare(cfg, epsilons=[8.0], aggregators=["gnmax"], direct=["output-softmax", "objective-ovr"])
    rows = {r["aggregator"]: r for r in out["rows"]}
    assert set(rows) == {"gnmax", "output-softmax", "objective-ovr"}
    assert rows["output-softmax"]["answered"] is None and rows["output-softmax"]["student_acc"] > 0.6
    assert "direct rows" in out["table"] and "cumulative cost of all 3 rows" in out["table"]
    assert out["ledger"]["spent_basic_composition"]["epsilon"] == pytest.approx(sum(r["epsilon"] for r in out["rows"]))
    # the direct learners' models are mechanism outputs: published, and the files section says so
    assert "direct/" in out["files"]["published"] and "direct/" not in out["files"]["private"]
    again = run_compare(cfg, epsilons=[8.0], aggregators=["gnmax"], direct=["output-softmax", "objective-ovr"])
    assert all(r["reused"] for r in again["rows"])
    assert again["ledger"]["spent_basic_composition"] == out["ledger"]["spent_basic_composition"]


def test_compare_with_mixed_learners_keeps_one_relation_per_ledger(tmp_path, monkeypatch):
    """An add/remove compare with a releaser, a head and DP-SGD: every spend line states add/remove, so the
    enforced total is an add/remove guarantee; the same plan under replace-one counts DP-SGD by group privacy."""
    from pate_stab.privacy.ledger.data_budget import BUDGET_DIR_ENV, set_default_cap
    from pate_stab.privacy.ledger.privacy_ledger import replace_one_cost
    from pate_stab.run.compare import run_compare

    totals = {}
    for relation in ("add_remove", "replace_one"):
        # one relation per data set's budget too: each relation's run on the same data with its own data holder
        monkeypatch.setenv(BUDGET_DIR_ENV, str(tmp_path / f"budget_{relation}"))
        set_default_cap(1e6, 0.5)
        # 4 epochs of DP-SGD (the default 40 is 391 steps at N = 10,000): the relations and sums are the subject
        cfg = dataclasses.replace(_config(tmp_path, relation), neighbouring=relation, private_size_hint=10000,
                                  dpsgd_epochs=4)  # fmt: skip
        out = run_compare(cfg, epsilons=[8.0], aggregators=["gnmax"], direct=["output-softmax", "dpsgd-linear"])
        records = map(json.loads, (cfg.run_dir / "ledger.jsonl").read_text().splitlines())
        spends = [r for r in records if r["kind"] == "spend"]
        assert len(spends) == 3
        rows = {r["aggregator"]: r for r in out["rows"]}
        dp = rows["dpsgd-linear"]
        if relation == "add_remove":
            assert {r["relation"] for r in spends} == {"add_remove"}
            expected = (rows["gnmax"]["epsilon"] + 8.0 + dp["epsilon"], rows["gnmax"]["delta"] + dp["delta"])
        else:
            assert [r["relation"] for r in spends] == ["replace_one", "replace_one", "add_remove"]
            converted = replace_one_cost(dp["epsilon"], dp["delta"])
            expected = (rows["gnmax"]["epsilon"] + 8.0 + converted[0], rows["gnmax"]["delta"] + converted[1])
        spent = out["ledger"]["spent_basic_composition"]
        assert (spent["epsilon"], spent["delta"]) == (pytest.approx(expected[0]), pytest.approx(expected[1]))
        totals[relation] = spent["epsilon"]
    assert totals["replace_one"] > totals["add_remove"]


def test_learner_names_agree_with_the_config():
    from pate_stab.run.config import DIRECT_LEARNER_NAMES

    assert tuple(DIRECT_LEARNERS) == DIRECT_LEARNER_NAMES


def test_transfer_with_a_direct_learner(tmp_path, capsys):
    argv = ["transfer", "--run-name", "t", "--checkpoints-dir", str(tmp_path), "--set", "num_private=3000",
            "--teacher-model", "propagate", "--num-teachers", "5", "--aggregator", "objective-softmax",
            "--epsilon", "3"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((tmp_path / "t" / "report.json").read_text())
    assert report["kind"] == "direct" and report["neighbouring"] == "add_remove" and report["epsilon"] == 3.0
    assert report["ledger"]["spent_basic_composition"]["epsilon"] == 3.0
    assert main(argv) == 0  # a rerun replays: nothing spent twice
    again = json.loads((tmp_path / "t" / "report.json").read_text())
    assert again["row"]["reused"] and again["test_accuracy"] == report["test_accuracy"]
    assert "replayed from the ledger" in capsys.readouterr().out


def test_one_vs_rest_uses_the_public_class_list_not_the_classes_present(prepared):
    """A class missing from the private labels changes no shape and raises nothing (DESIGN fact 6)."""
    y = prepared.task.private_y.clone()
    y[y == 2] = 0
    prep = dataclasses.replace(prepared, task=dataclasses.replace(prepared.task, private_y=y))
    with _ledger(prepared) as ledger:
        row = run_direct(prep, ledger, learner="output-ovr", epsilon=6.0, repeat=12)
        model = torch.load(prepared.run_dir / "direct" / ledger.entry(row["spend_id"]).result["model"])
    assert model["weight"].shape == (prepared.task.num_classes, prepared.task.private_x.shape[1])


def _published_text(run_dir) -> str:
    """Every published text file of a run folder (not the private ones, not working state, not model binaries)."""
    skip = ("teachers", "features", "direct")
    return "\n".join(
        p.read_text()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and not p.name.startswith("private") and p.suffix in (".json", ".jsonl", ".txt")
        and not any(part in skip for part in p.relative_to(run_dir).parts[:-1])
    )  # fmt: skip


def _mentions(text: str, number: int) -> bool:
    """Whether ``number`` appears in ``text`` as a number; hex digests (the ledger's hash chain, 64 hex
    digits drawn afresh by every secure run) are skipped, since a digest's digit runs between letters would
    otherwise read as numbers."""
    import re

    text = re.sub(r"(?<![0-9a-f])[0-9a-f]{32,}(?![0-9a-f])", "#", text)
    return re.search(rf"(?<![\d.]){number}(?![\d.])", text) is not None


def test_dpsgd_linear_on_neighbours_publishes_the_same_settings_and_never_the_private_size(prepared, tmp_path):
    """Add/remove: on D (2,990 records) and D minus one record the spend (q, steps, σ, ledger lines) is the same,
    computed from the synthetic task's public size num_private = 3,000; neither count appears in a published file."""
    rows, dirs = _neighbour_rows(prepared, tmp_path, learner="dpsgd-linear", epsilon=2.0, repeat=0, dpsgd=SMALL_DPSGD)
    a, b = rows
    keys = ("noise_multiplier", "sample_rate", "steps", "public_size")
    assert [a["settings"][k] for k in keys] == [b["settings"][k] for k in keys]
    assert a["settings"]["public_size"] == prepared.config.data.num_private == 3000
    assert (a["settings"]["sample_rate"], a["settings"]["steps"]) == (256 / 3000, round(5 / (256 / 3000)))
    assert a["note"] == b["note"] and a["epsilon"] == b["epsilon"]
    assert spend_lines(dirs[0]) == spend_lines(dirs[1])
    for n, run_dir, row in zip((2990, 2989), dirs, rows, strict=True):
        published = _published_text(run_dir) + json.dumps(row)
        assert not _mentions(published, n), n


def _own(n: int, drop: int = 0):
    from pate_stab.data.own import own_data

    g = torch.Generator().manual_seed(3)
    centres = 4 * torch.randn(3, 6, generator=g)

    def part(m):
        y = torch.randint(0, 3, (m,), generator=g)
        return centres[y] + torch.randn(m, 6, generator=g), y

    (px, py), (ux, uy), (ex, ey) = part(n), part(200), part(200)
    return own_data((px[drop:], py[drop:]), ux, (ex, ey), classes=3, public_y=uy)


def _own_config(tmp_path, name, **kw):
    return TransferConfig(run_name=name, checkpoints_dir=str(tmp_path), dataset="arrays", aggregator="stability",
                          num_teachers=5, teacher_model="propagate", num_queries=20, accelerator="cpu",
                          releaser_noise="seeded", **kw)  # fmt: skip


def test_compare_on_neighbouring_own_data_publishes_no_private_size(tmp_path):
    """compare.json / compare.txt / ledger of a dpsgd-linear compare on 613 and 612 own records (N = 10,000 given):
    the same settings and spend, and the private count only in the private file."""
    from pate_stab.run.compare import run_compare

    outs, dirs = [], []
    for drop in (0, 1):
        cfg = _own_config(tmp_path / str(drop), "own", private_size_hint=10000)
        with pytest.warns(UserWarning, match="may train badly"):  # 613 records, N = 10,000: private, but warned
            outs.append(run_compare(cfg, epsilons=[2.0], aggregators=[], direct=["dpsgd-linear"], data=_own(613, drop)))
        dirs.append(cfg.run_dir)
    (a,), (b,) = outs[0]["rows"], outs[1]["rows"]
    assert a["settings"] == b["settings"] and a["settings"]["public_size"] == 10000
    # B from N by the documented rule (Tramèr & Boneh's sampling rate kept): 1024 of N = 10,000
    assert (a["settings"]["sample_rate"], a["settings"]["steps"]) == (1024 / 10000, round(40 / (1024 / 10000)))
    assert spend_lines(dirs[0]) == spend_lines(dirs[1])
    for n, run_dir in zip((613, 612), dirs, strict=True):
        assert (run_dir / "compare.json").is_file() and (run_dir / "compare.txt").is_file()
        assert not _mentions(_published_text(run_dir), n), n
    assert _mentions((dirs[0] / "private_compare.json").read_text(), 613)  # kept where it belongs


def test_own_data_without_a_size_hint_is_refused_before_any_spend(tmp_path, capsys):
    from pate_stab.run.compare import run_compare

    cfg = _own_config(tmp_path, "nohint")
    with pytest.raises(ValueError, match="set private_size_hint.*Do not compute it from the private data"):
        run_compare(cfg, epsilons=[2.0], aggregators=[], direct=["dpsgd-linear"], data=_own(613))
    assert not (cfg.run_dir / "ledger.jsonl").exists() or not spend_lines(cfg.run_dir)
    data = _own(613)
    errors = cli_refusals(tmp_path, (data.private_x, data.private_y), data.public_x, "dpsgd-linear", capsys)
    for name, err in errors.items():
        assert "set private_size_hint" in err
        ledger = tmp_path / name / "ledger.jsonl"
        assert not ledger.exists() or not spend_lines(tmp_path / name)
    with pytest.raises(ValueError, match="private_size_hint must be a positive integer"):
        _own_config(tmp_path, "bad", private_size_hint=0)

"""The command line says no fast and in words a person can act on (issue 44).

Input errors print one line (no argparse usage lines, no traceback) and exit 2, before torch or
Lightning is imported: a CSV value outside the schema's categories, a target ε above the largest
the aggregators are calibrated for. Each case runs in a fresh interpreter so that the modules it
imported can be listed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data.survey_tables import survey_files, survey_rows, write_csv

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "lightning", "pytorch_lightning")
_PROBE = """
import json, sys
from pate_stab.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)  # noqa: UP031


def probe(args: list[str], cwd: Path) -> tuple[int, list[str], str]:
    """(exit status, heavy modules imported, stderr) of ``pate-stab ARGS`` in a fresh interpreter."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["code"], result["heavy"], done.stderr


def _own(files: dict) -> list[str]:
    return ["--private", str(files["private"]), "--public", str(files["public"]), "--evaluation",
            str(files["evaluation"]), "--schema", str(files["schema"])]  # fmt: skip


def test_a_transfer_on_an_undeclared_category_stops_before_torch_without_usage(tmp_path):
    files = survey_files(tmp_path / "survey")
    rows = survey_rows(300, seed=1)
    rows[40][2] = "9"
    write_csv(files["private"], rows)
    code, heavy, err = probe(["transfer", *_own(files), "--checkpoints-dir", str(tmp_path / "ck")], tmp_path)
    assert code == 2 and heavy == [], (heavy, err)
    assert "row 42, column 'occupation': value '9' is not a declared category" in err
    assert "usage:" not in err and "Traceback" not in err
    assert not (tmp_path / "ck").exists()  # nothing written, nothing spent


@pytest.mark.parametrize(
    "args",
    [
        ["transfer", "--epsilon", "1000000"],
        ["compare", "--epsilons", "2", "100"],
        ["plan", "--num-private", "4456", "--num-classes", "2", "--num-queries", "500", "--epsilon", "1000"],
    ],
)
def test_a_huge_epsilon_is_refused_in_words_before_torch(tmp_path, args):
    files = survey_files(tmp_path / "survey")
    own = _own(files) if args[0] != "plan" else []
    code, heavy, err = probe([*args, *own, "--checkpoints-dir", str(tmp_path / "ck")] if own else args, tmp_path)
    assert code == 2 and heavy == [], (heavy, err)
    assert "above 64, the largest ε the aggregators are calibrated for" in err and "Choose ε ≤ 64" in err
    assert "Traceback" not in err and "usage:" not in err and "accountant='rdp'" not in err


def test_the_cli_bound_is_the_accountants():
    from pate_stab.cli.checks import MAX_EPSILON
    from pate_stab.privacy.accounting.composition import MAX_PLD_EPSILON

    assert MAX_EPSILON == MAX_PLD_EPSILON


@pytest.mark.slow  # two fresh interpreters that import torch: ~10 s on an idle machine
def test_plan_and_predict_load_no_lightning(tmp_path):
    code, heavy, err = probe(["plan", "--num-private", "4456", "--num-classes", "2", "--num-queries", "100",
                              "--epsilon", "4"], tmp_path)  # fmt: skip
    assert code == 0 and "lightning" not in heavy, err
    done = subprocess.run(
        [sys.executable, "-c", "import sys, pate_stab.run.student_file; print(sorted(m for m in sys.modules "
         "if m.split('.')[0] in ('lightning', 'pytorch_lightning')))"],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.stdout.strip() == "[]", done.stderr


def test_a_schema_with_an_id_column_keys_the_partition_by_record_id_unless_told(tmp_path):
    from pate_stab.run.config import TransferConfig

    files = survey_files(tmp_path / "survey")
    own = {"dataset": "files", "private": str(files["private"]), "public": str(files["public"]),
           "schema": str(files["schema"])}  # fmt: skip
    config = TransferConfig(**own)
    assert config.release.partition_key == "record_id" and config.privacy_relation()["partition_key"] == "record_id"
    assert TransferConfig(**own, partition_key="content").partition_key == "content"
    assert TransferConfig.from_dict({"data": own}).partition_key == "record_id"
    no_ids = tmp_path / "no_ids.json"
    no_ids.write_text(json.dumps({**json.loads(files["schema"].read_text()), "id_column": None}))
    assert TransferConfig(**(own | {"schema": str(no_ids)})).partition_key == "content"


def test_a_guarantee_too_weak_for_the_accountant_names_the_aggregator_and_the_lever():
    from pate_stab.aggregation.registry import AggregatorSettings, _pld_limited
    from pate_stab.privacy.accounting.composition import PldRangeError, check_pld_feasible
    from pate_stab.privacy.accounting.events import LaplaceEvent, SelfComposedEvent

    def too_weak(settings, source):  # the accountant's own refusal, as a PATE baseline's calibration raises it
        check_pld_feasible(SelfComposedEvent(LaplaceEvent(noise_scale=0.01, sensitivity=2.0), 10), delta=1e-5,
                           accountant="pld")  # fmt: skip

    settings = AggregatorSettings(epsilon=50.0, delta=1e-5, num_queries=10, num_teachers=100, max_unstable=10)
    with pytest.raises(PldRangeError, match=r"lnmax at epsilon = 50 over m = 10 queries .* Choose a smaller epsilon"):
        _pld_limited("lnmax", too_weak)(settings, None)


@pytest.mark.slow  # a PLD calibration at ε = 50: ~20 s
def test_a_baseline_too_weak_for_the_accountant_is_refused_through_the_registry():
    from pate_stab.aggregation.registry import AggregatorSettings, calibrated_noise
    from pate_stab.privacy.accounting.composition import PldRangeError

    settings = AggregatorSettings(epsilon=50.0, delta=1e-5, num_queries=10, num_teachers=100, max_unstable=10)
    with pytest.raises(PldRangeError, match=r"lnmax at epsilon = 50 over m = 10 queries .* Choose a smaller epsilon"):
        calibrated_noise("lnmax", settings)

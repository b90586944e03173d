"""The ``pate-stab`` command line's printed lines: a transfer run's report and its parts
(noise, query selection, privacy relation). Used by :mod:`pate_stab.cli.commands`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _fmt(v: Any, spec: str = ".4f") -> str:
    return "-" if v is None else format(v, spec)


def _relation_line(privacy: dict[str, Any] | None) -> str:
    if not privacy:
        return "-"
    teachers = privacy["teachers_changed_per_neighbour"]
    return (
        f"{privacy['neighbouring'].replace('_', '/')} ({privacy['partition_key']} partition keys; "
        f"{teachers} teacher{'s' if teachers > 1 else ''} per neighbour)"
    )


def _print_report(r: dict[str, Any]) -> None:
    diagnostics = Path(r["run_dir"]) / "private_diagnostics.json"
    d = json.loads(diagnostics.read_text()) if diagnostics.is_file() else {}
    q, t = r["queries"], d.get("teachers", {})
    not_asked = q.get("not_asked", 0)
    halted = f" (halted: {not_asked} not asked)" if q["halted"] else ""
    lines = [
        ("dataset", f"{r['dataset']} ({r['threat_model']['name']})"),
        (
            "teachers",
            f"k={r['num_teachers']} {r['teacher_model']['kind']}"
            if r.get("teacher_model") is not None
            else f"none: the K={r['num_teachers']} nearest private records of a fresh sample vote (Private-kNN)",
        ),
        (
            "mean teacher / plurality acc",
            f"{_fmt(t.get('mean_accuracy'))} / {_fmt(t.get('plurality_accuracy'))} (private diagnostic)",
        ),  # fmt: skip
        ("aggregator", f"{r['aggregator']}"),
        ("query selection", _selection_line(r["query_selection"])),
        ("certified (ε, δ)", f"({r['epsilon']:.4g}, {r['delta']:.3g})"),
        ("noise", _noise_line(r.get("noise", {}))),
        ("queries seen / answered / ⊥", f"{q['seen']} / {q['answered']} / {q['abstained']}{halted}"),
        ("privacy relation", _relation_line(r.get("privacy"))),
        ("label accuracy (answered)", _fmt(r["label_accuracy_answered"])),
        ("student test accuracy", _fmt(r["student"]["test_accuracy"])),
        ("student acc, unlabelled pool", _fmt(r["student"].get("unlabelled_pool_accuracy"))),
    ]
    # figures that need labels the run does not have (pool without labels, no evaluation set) are left out
    if not r.get("pool_labelled", True):
        lines = [(k, v) for k, v in lines if k not in ("label accuracy (answered)", "student acc, unlabelled pool")]
    if r["student"]["test_accuracy"] is None:
        lines = [(k, v) for k, v in lines if k not in ("mean teacher / plurality acc", "student test accuracy")]
    lines += [
        ("wall time (s)", " ".join(f"{k}={v:.1f}" for k, v in d.get("wall_time_s", {}).items())),
        ("report (published)", str(Path(r["run_dir"]) / "report.json")),
        ("private diagnostics", f"{diagnostics} (mode 0600: never publish)"),
        ("ledger", r["ledger"]["path"]),
    ]
    lines += [("WARNING", w) for w in r["student"].get("warnings", [])]
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k:<{width}}  {v}")


def _noise_line(noise: dict[str, Any]) -> str:
    if noise.get("noise") == "secure":
        return "secure (exact discrete noise from the OS's CSPRNG)"
    from pate_stab.privacy.noise.secure import SEEDED_NOISE_WARNING

    return f"SEEDED — {noise.get('warning', SEEDED_NOISE_WARNING)}"


def _selection_line(sel: dict[str, Any]) -> str:
    rounds = sel.get("rounds", [])
    if sel["strategy"] == "first":
        return "first (pool order)"
    if rounds and all("size" not in r for r in rounds):
        # a release in rounds (pate_stab.run.rounds): one selection record per release round
        parts = [f"round {r.get('round', i + 1)}: {_selection_line(r)}" for i, r in enumerate(rounds)]
        return f"{sel['strategy']} ({'; '.join(parts)})"
    return f"{sel['strategy']} ({len(rounds)} rounds: {'/'.join(str(r['size']) for r in rounds)} queries)"

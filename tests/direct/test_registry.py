"""The direct learners' registry: one spec per learner, agreeing with the run's vocabularies, and the
pipeline step reading specs, never a learner's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pate_stab.direct.registry import DIRECT_LEARNERS, DIRECT_RELATIONS, DIRECT_SPECS, NOISE_KINDS, direct_spec
from pate_stab.run.config import DIRECT_LEARNER_NAMES, IMAGE_DIRECT_LEARNERS, LABEL_DIRECT_LEARNERS

ROOT = Path(__file__).resolve().parents[2]


def test_the_registry_agrees_with_the_runs_vocabularies():
    assert tuple(DIRECT_SPECS) == tuple(DIRECT_LEARNER_NAMES) == tuple(DIRECT_LEARNERS)
    assert {n for n, s in DIRECT_SPECS.items() if s.unit == "label"} == set(LABEL_DIRECT_LEARNERS)
    assert {n for n, s in DIRECT_SPECS.items() if s.needs_images} == set(IMAGE_DIRECT_LEARNERS)


@pytest.mark.parametrize("name", list(DIRECT_SPECS))
def test_each_spec_is_consistent(name):
    spec = direct_spec(name)
    assert spec.name == name and spec.noise in NOISE_KINDS and spec.unit in ("record", "label")
    assert DIRECT_RELATIONS[name] == spec.relation in ("add_remove", "replace_one", "either")
    # DP-SGD: (ε, δ) under add/remove with a schedule; the label-DP learners: replace-one, no public size
    assert spec.is_dpsgd == (spec.schedule is not None) == (spec.relation == "add_remove")
    assert (spec.unit == "label") == (spec.relation == "replace_one") == (not spec.needs_public_size)
    assert spec.held_relation("add_remove") == ("add_remove" if spec.relation == "either" else spec.relation)


def test_an_unknown_learner_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown direct learner 'sgd'; choose from objective-softmax"):
        direct_spec("sgd")


def test_the_pipeline_step_never_compares_a_learner_name():
    """run/direct.py reads the spec: no ``learner == "…"``, ``startswith("dpsgd")`` or ``endswith("-softmax")``."""
    tree = ast.parse((ROOT / "pate_stab" / "run" / "direct.py").read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("startswith", "endswith") and any(
                isinstance(a, ast.Constant) and str(a.value) in DIRECT_SPECS or str(a.value) in ("dpsgd", "-softmax")
                for a in node.args
                if isinstance(a, ast.Constant)
            ):
                bad.append(node.lineno)
        if isinstance(node, ast.Compare):
            consts = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            if any(v in DIRECT_SPECS for v in consts):
                bad.append(node.lineno)
    assert not bad, f"pate_stab/run/direct.py branches on a learner's name at lines {bad}"

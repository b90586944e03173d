"""The teacher models' registry: one spec per ``teacher_model``, and ``prepare`` reading the spec, never the name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pate_stab.run.config import TEACHER_MODELS
from pate_stab.teachers.fixmatch_settings import check_fixmatch_teachers
from pate_stab.teachers.registry import TEACHER_SPECS, teacher_spec

ROOT = Path(__file__).resolve().parents[2]


def test_one_spec_per_teacher_model():
    assert tuple(TEACHER_SPECS) == tuple(TEACHER_MODELS)
    assert all(spec.name == name for name, spec in TEACHER_SPECS.items())
    # propagation teachers are rebuilt each run; only FixMatch checks for images
    assert [n for n, s in TEACHER_SPECS.items() if not s.trains] == ["propagate"]
    checks = {n: s.check for n, s in TEACHER_SPECS.items() if s.check is not None}
    assert checks == {"fixmatch": check_fixmatch_teachers}


def test_an_unknown_teacher_model_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown teacher_model 'forest'; choose from logistic, mlp"):
        teacher_spec("forest")


def test_prepare_never_compares_the_teacher_model_name():
    tree = ast.parse((ROOT / "pate_stab" / "run" / "prepare.py").read_text(encoding="utf-8"))
    bad = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value in TEACHER_SPECS for c in [node.left, *node.comparators])
    ]
    assert not bad, f"pate_stab/run/prepare.py branches on a teacher model's name at lines {bad}"

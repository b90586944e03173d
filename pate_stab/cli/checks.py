"""The command line's checks that run before torch is imported, and how it reports an error.

A command that will stop on its input should say so in a second: :func:`check_early` reads the
settings a run's input depends on (from the recipe YAML, the flags and ``--set``, without
building the run's configuration, which imports the training code) and checks

* every target ε against :data:`MAX_EPSILON`, the largest ε the aggregators are calibrated for;
* a user's own files (:func:`pate_stab.data.own_files.check_own_files`): their kinds, and every
  cell of a CSV table against its public schema (undeclared categories, repeated record ids, the
  label column, the text encoding).

The full checks run again when the data are loaded; these only make the refusal fast. Errors
about the input (the data, a value out of range) are printed as one line, ``pate-stab: error:
…``, with exit status 2 (:func:`fail`); argparse's usage lines are kept for errors in the
arguments' syntax.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["MAX_EPSILON", "check_early", "epsilon_error", "fail"]

MAX_EPSILON = 64.0
"""The largest target ε the command line accepts (``pate_stab.privacy.accounting.composition.MAX_PLD_EPSILON``).

The tight calibration of the stability releasers and the PATE baselines certify ε with
dp-accounting's privacy-loss-distribution accountant, whose grids grow with ε and whose
probabilities are computed from e^ε (it overflows past ε ≈ 709; a test pins the two constants
equal). Beyond 64 the guarantee bounds how much one record can change the odds of any outcome
by e^64 ≈ 6·10^27 only: it protects nothing.
"""

_OWN_KEYS = ("dataset", "private", "public", "evaluation", "schema", "classes", "pool_labels", "encoding", "epsilon")


def fail(message: str, *, prog: str = "pate-stab") -> NoReturn:
    """An input error: one line on stderr (no usage lines) and exit status 2."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def epsilon_error(epsilon: Any, what: str = "epsilon") -> str | None:
    """The refusal of a target ε above :data:`MAX_EPSILON` (None when it is within it or not a number)."""
    if not isinstance(epsilon, int | float) or isinstance(epsilon, bool) or not epsilon > MAX_EPSILON:
        return None
    return (
        f"{what} = {epsilon:g} is above {MAX_EPSILON:g}, the largest ε the aggregators are calibrated for: the "
        "tight calibration and the PATE baselines certify ε with a privacy-loss-distribution accountant built from "
        f"e^ε, which overflows or outgrows memory beyond it, and a guarantee at ε > {MAX_EPSILON:g} lets one record "
        f"change the odds of any outcome by up to e^{MAX_EPSILON:g} ≈ 6e27, which protects nothing. Choose "
        f"ε ≤ {MAX_EPSILON:g}"
    )


def _recipe(path: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings a recipe YAML gives for :data:`_OWN_KEYS` (flat, or in any section) and its compare block."""
    if path is None or not path.is_file():
        return {}, {}
    import yaml

    try:
        loaded = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError):
        return {}, {}  # reported by the full configuration step
    if not isinstance(loaded, dict):
        return {}, {}
    out: dict[str, Any] = {}
    for key, value in loaded.items():
        if key in _OWN_KEYS:
            out[key] = value
        elif isinstance(value, dict) and key != "compare":
            out.update({k: v for k, v in value.items() if k in _OWN_KEYS})
    compare = loaded.get("compare")
    return out, compare if isinstance(compare, dict) else {}


def early_settings(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings of :data:`_OWN_KEYS` as the run will see them (recipe, then flags, then ``--set``)."""
    import yaml

    settings, compare = _recipe(getattr(args, "config", None))
    for key in _OWN_KEYS:
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = value
    if getattr(args, "classes", None) is not None:
        settings["classes"] = args.classes
    for item in getattr(args, "overrides", None) or []:
        key, sep, value = item.partition("=")
        name = key.strip().replace("-", "_").rpartition(".")[2]
        if sep and name in _OWN_KEYS:
            try:
                settings[name] = yaml.safe_load(value)
            except yaml.YAMLError:
                pass  # reported by the full configuration step
    if settings.get("private") is not None and "dataset" not in settings:
        settings["dataset"] = "files"
    return settings, compare


def check_early(args: argparse.Namespace) -> None:
    """Refuse, before torch is imported, a target ε above :data:`MAX_EPSILON` and own files that do
    not fit (:mod:`pate_stab.data.own_files`); exit 2 with one line naming the problem."""
    settings, compare = early_settings(args)
    epsilons: list[tuple[str, Any]] = [("epsilon", settings.get("epsilon"))]
    if args.command == "compare":
        given = getattr(args, "epsilons", None) or compare.get("epsilons") or []
        epsilons += [("--epsilons value", e) for e in (given if isinstance(given, list) else [given])]
    for what, eps in epsilons:
        message = epsilon_error(eps, what)
        if message:
            fail(message)
    if settings.get("dataset") != "files" or not settings.get("private") or not settings.get("public"):
        return
    from pate_stab.data.own_files import InputDataError, check_own_files

    classes = settings.get("classes")
    try:
        check_own_files(
            settings["private"], settings["public"], settings.get("evaluation"),
            classes=classes, schema=settings.get("schema"), pool_labels=bool(settings.get("pool_labels")),
            encoding=settings.get("encoding"),
        )  # fmt: skip
    except (InputDataError, FileNotFoundError) as exc:
        fail(str(exc))

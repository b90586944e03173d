"""TransferConfig in sections: sectioned and flat access, flat and nested recipes, the command line's
``--set section.key``, and the Literal types of the choices against the tables that check them."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import pickle
import typing
from pathlib import Path

import pytest
import yaml

from pate_stab.aggregation.registry import AGGREGATORS
from pate_stab.cli.commands import _config_dict, _make_config, build_parser, main
from pate_stab.models import FixMatchConfig
from pate_stab.models.augment import AUGMENTATIONS
from pate_stab.run.config import TransferConfig, flat_key, flat_settings, names
from pate_stab.run.config.sections import (
    SECTION_OF,
    SECTIONS,
    FeatureSettings,
    ReleaseSettings,
    RoundSettings,
    StudentSettings,
)
from pate_stab.vocabulary import BottomPolicy

ROOT = Path(__file__).resolve().parents[2]

FLAT = """
run_name: small
seed: 3
dataset: synthetic
num_private: 3000
features: pca
pca_dim: 8
num_teachers: 40
teacher_hidden: [16]
aggregator: gnmax
epsilon: 2.0
neighbouring: replace_one
query_selection: spread
rounds: 1
student_hidden: [32, 16]
student_lr: 0.01
private_size_hint: 3000
accelerator: cpu
"""
NESTED = """
run_name: small
seed: 3
data:
  dataset: synthetic
  num_private: 3000
feature_stage:
  features: pca
  pca_dim: 8
teachers:
  num_teachers: 40
  teacher_hidden: [16]
release:
  aggregator: gnmax
  epsilon: 2.0
  neighbouring: replace_one
selection:
  query_selection: spread
release_rounds:
  rounds: 1
student:
  student_hidden: [32, 16]
  student_lr: 0.01
direct:
  private_size_hint: 3000
execution:
  accelerator: cpu
"""


def test_sections_and_flat_names_read_the_same_setting():
    config = TransferConfig(epsilon=2.0, num_teachers=7, features="pca", rounds=1, student_hidden=[8, 4])
    assert isinstance(config.release, ReleaseSettings) and isinstance(config.feature_stage, FeatureSettings)
    assert isinstance(config.release_rounds, RoundSettings) and isinstance(config.student, StudentSettings)
    assert config.release.epsilon == config.setting("epsilon") == config.setting("release.epsilon") == 2.0
    assert config.teachers.num_teachers == config.setting("num_teachers") == 7
    assert config.student.student_hidden == config.setting("student_hidden") == (8, 4)
    with pytest.warns(DeprecationWarning, match=r"config\.epsilon is shorthand for config\.release\.epsilon"):
        assert config.epsilon == 2.0  # the flat read still works, with a warning
    for key, value in config.to_dict().items():  # every setting, by its flat name and in its section
        section = SECTION_OF.get(key)
        flat = config.setting(key)
        assert (list(flat) if isinstance(flat, tuple) else flat) == value, key
        if section is not None:
            assert getattr(getattr(config, section), key) is flat, key
            with pytest.warns(DeprecationWarning):
                assert getattr(config, key) is flat, key
    with pytest.raises(ValueError, match="unknown configuration keys: epsilom"):
        config.setting("epsilom")
    with pytest.raises(AttributeError, match="no attribute 'epsilom'"):
        config.epsilom  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epsilon = 3.0  # type: ignore[misc]


def test_flat_names_are_sorted_into_sections_and_replace_keeps_working():
    config = TransferConfig(epsilon=2.0, num_teachers=7)
    assert config == TransferConfig(release=ReleaseSettings(epsilon=2.0), teachers={"num_teachers": 7})
    assert config.release == ReleaseSettings(epsilon=2.0)
    changed = dataclasses.replace(config, epsilon=3.0, student_epochs=2, run_name="other")
    assert (changed.epsilon, changed.release.epsilon, changed.student.student_epochs) == (3.0, 3.0, 2)
    assert changed.run_name == "other" and changed.teachers == config.teachers and changed.data == config.data
    assert config.release.epsilon == 2.0  # the original is unchanged
    # a flat name beside its section's object replaces that field (dataclasses.replace passes both)
    assert TransferConfig(release=ReleaseSettings(epsilon=2.0), epsilon=5.0).release.epsilon == 5.0
    with pytest.raises(ValueError, match="epsilon must be a positive finite number"):
        dataclasses.replace(config, epsilon=-1.0)  # the section checks its settings again
    with pytest.raises(ValueError, match="rounds > 1 is implemented for the stability aggregator only"):
        dataclasses.replace(config, aggregator="gnmax", rounds=2)  # and the cross-section checks run again
    assert pickle.loads(pickle.dumps(config)) == config and copy.deepcopy(config) == config
    assert hash(config) == hash(TransferConfig(epsilon=2.0, num_teachers=7))


def test_flat_and_nested_yaml_load_equal():
    flat, nested = yaml.safe_load(FLAT), yaml.safe_load(NESTED)
    assert TransferConfig.from_dict(flat) == TransferConfig.from_dict(nested)
    config = TransferConfig.from_dict(nested)
    assert (config.release.aggregator, config.release.epsilon, config.student.student_hidden, config.seed) == (
        "gnmax",
        2.0,
        (32, 16),
        3,
    )
    assert TransferConfig.from_dict(config.to_dict()) == config
    assert TransferConfig.from_dict(config.to_dict(nested=True)) == config
    assert json.loads(json.dumps(config.to_dict())) == config.to_dict()  # config.json's flat form
    assert TransferConfig.from_dict(yaml.safe_load("direct:\n  # dpsgd_epochs: 10\n")) == TransferConfig()


def test_a_sectioned_recipe_loads_as_its_flat_form():
    """A recipe in sections equals its settings written flat (flattened here by hand, not by the code)."""
    data = yaml.safe_load((ROOT / "recipes" / "configs" / "fashion_mnist_stab.yaml").read_text())
    data.pop("compare")
    assert set(data) - {"run_name", "seed"} <= set(SECTIONS), sorted(data)  # the recipe is in sections
    flat = {
        k: v for key, value in data.items() for k, v in (value.items() if isinstance(value, dict) else [(key, value)])
    }
    assert "epsilon" in flat and "release" not in flat
    config = TransferConfig.from_dict(flat)
    assert TransferConfig.from_dict(data) == config
    assert (config.feature_stage.features, config.selection.query_selection, config.student.student_select) == (
        "scattering",
        "spread",
        "cv",
    )


def test_a_setting_given_flat_and_in_its_section_is_refused():
    with pytest.raises(ValueError, match=r"epsilon is given twice, as epsilon and as release\.epsilon"):
        TransferConfig.from_dict({"epsilon": 2.0, "release": {"epsilon": 3.0}})
    with pytest.raises(ValueError, match=r"epsilon is given twice, as release\.epsilon and as epsilon"):
        TransferConfig(release={"epsilon": 2.0}, epsilon=2.0)
    with pytest.raises(ValueError, match=r"epsilon is given twice"):
        flat_settings({"release.epsilon": 2.0, "release": {"epsilon": 3.0}})


def test_an_unknown_key_is_refused_naming_its_section():
    with pytest.raises(ValueError, match=r"release\.colour; section release holds: aggregator, epsilon, delta"):
        TransferConfig.from_dict({"release": {"colour": "blue"}})
    # a setting under another section: the message names the section it belongs to
    with pytest.raises(ValueError, match=r"release\.num_teachers \(num_teachers belongs to teachers: "
                                         r"teachers\.num_teachers\); section release holds"):  # fmt: skip
        TransferConfig.from_dict({"release": {"num_teachers": 5}})
    with pytest.raises(ValueError, match=r"unknown configuration keys: colour, epsilom \(did you mean epsilon\?\)"):
        TransferConfig.from_dict({"colour": "blue", "epsilom": 2.0})
    with pytest.raises(ValueError, match=r"unknown configuration section 'relase'"):
        flat_key("relase.epsilon")
    with pytest.raises(ValueError, match=r"release is a section: give its settings as a mapping"):
        TransferConfig.from_dict({"release": 2.0})
    with pytest.raises(ValueError, match=r"release is a section"):
        TransferConfig(release=StudentSettings())  # a section object of another kind


def _config(argv: list[str]) -> TransferConfig:
    parser = build_parser()
    args = parser.parse_args(["transfer", "--run-name", "x", *argv])
    return _make_config(parser, _config_dict(parser, args, {}))


def test_set_takes_a_flat_or_a_sectioned_key(tmp_path, capsys):
    assert _config(["--set", "release.epsilon=2"]).release.epsilon == 2
    assert _config(["--set", "epsilon=2"]).epsilon == 2
    assert _config(["--set", "student.student_hidden=[8, 8]"]).student_hidden == (8, 8)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(NESTED + "compare:\n  epsilons: [1.0, 4.0]\n")
    # --set overrides the recipe's setting, whichever form either uses
    assert _config(["--config", str(recipe), "--set", "release.epsilon=5"]).epsilon == 5
    assert _config(["--config", str(recipe), "--set", "epsilon=6"]).epsilon == 6
    assert _config(["--config", str(recipe), "--epsilon", "7"]).epsilon == 7
    assert _config(["--config", str(recipe)]) == dataclasses.replace(
        TransferConfig.from_dict(yaml.safe_load(NESTED)), run_name="x"
    )
    parser = build_parser()
    args = parser.parse_args(["compare", "--run-name", "x", "--config", str(recipe)])
    assert _config_dict(parser, args, {})["_compare"] == {"epsilons": [1.0, 4.0]}  # the compare block is kept
    for argv, message in (
        (["--set", "release.colour=1"], "section release holds: aggregator"),
        (["--set", "colour=1"], "unknown configuration keys: colour"),
    ):
        with pytest.raises(SystemExit) as info:
            main(["transfer", "--run-name", "x", *argv])
        assert info.value.code == 2
        assert message in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("epsilon: 2\nrelease:\n  epsilon: 3\n")
    with pytest.raises(SystemExit):
        main(["transfer", "--run-name", "x", "--config", str(bad)])
    assert "epsilon is given twice, as epsilon and as release.epsilon" in capsys.readouterr().err


# every setting that is a choice, with its section: each is typed by its vocabulary's Literal
CHOICES = {
    "dataset": "data", "threat_model": "data", "features": "feature_stage", "teacher_model": "teachers",
    "aggregator": "release", "calibration": "release", "releaser_noise": "release", "neighbouring": "release",
    "partition_key": "release", "privacy_unit": "release", "label_queries": "release", "query_selection": "selection",
    "selection_representatives": "selection", "round_features": "release_rounds", "student_model": "student",
    "bottom": "student", "student_method": "student", "student_select": "student", "fixmatch_preset": "student",
    "student_augment": "student", "stop_after": "execution", "accelerator": "execution",
}  # fmt: skip


def _choices(annotation: object) -> tuple[object, ...] | None:
    """The values of a Literal annotation (``Literal[...] | None`` included), or None if it is none."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    args = typing.get_args(annotation)
    literals = [a for a in args if typing.get_origin(a) is typing.Literal]
    if literals and all(typing.get_origin(a) is typing.Literal or a is type(None) for a in args):
        return tuple(v for a in literals for v in typing.get_args(a)) + ((None,) if type(None) in args else ())
    return None


def _literal_choices() -> dict[str, tuple[object, ...]]:
    found = {}
    for cls in SECTIONS.values():
        for key, annotation in typing.get_type_hints(cls).items():
            choices = _choices(annotation)
            if choices is not None:
                found[key] = choices
    return found


def test_every_choice_is_a_literal_and_a_value_outside_it_is_refused_naming_it():
    """Each choice is typed by its vocabulary's Literal, and the recipe's (YAML's) check refuses a value outside
    it with a message that names every value of that Literal: the check reads the one vocabulary."""
    found = _literal_choices()
    assert set(found) == set(CHOICES), sorted(set(found) ^ set(CHOICES))
    for key, choices in found.items():
        with pytest.raises(ValueError) as info:
            SECTIONS[CHOICES[key]](**{key: "not-a-choice"})
        missing = [v for v in choices if v is not None and str(v) not in str(info.value)]
        assert not missing, f"{key}: {info.value} does not name {missing}"
    assert typing.get_args(names.Aggregator) == names.RUN_AGGREGATORS + names.DIRECT_LEARNER_NAMES
    assert found["aggregator"] == names.RUN_AGGREGATORS + names.DIRECT_LEARNER_NAMES
    assert found["bottom"] == names.BOTTOMS == typing.get_args(BottomPolicy)  # the student's ⊥ policy is the config's


def test_a_table_of_descriptions_must_describe_its_vocabulary():
    assert names.FEATURES == names._described(names.FeatureMap, names.FEATURES)
    with pytest.raises(TypeError, match="descriptions of"):
        names._described(names.PartitionKey, {"content": "", "record-id": ""})
    with pytest.raises(TypeError, match="descriptions of"):
        names._described(names.PartitionKey, {"record_id": "", "content": ""})  # the Literal's order


def test_implementations_cover_their_vocabularies():
    """The tables of what implements each choice (the config does not import them) match it."""
    assert tuple(AUGMENTATIONS) == names.STUDENT_AUGMENTS
    for preset in names.FIXMATCH_PRESETS:  # each preset is a FixMatchConfig constructor
        assert isinstance(getattr(FixMatchConfig, preset)(), FixMatchConfig)
    assert set(names.RUN_AGGREGATORS) <= set(AGGREGATORS)
    # the direct learners' table against DIRECT_LEARNER_NAMES: tests/run/test_direct.py


def test_cli_choices_are_the_vocabularies():
    """The flags of ``release`` / ``plan`` / ``budget`` that list their choices list the vocabulary's."""
    vocabulary = {
        "calibration": names.CALIBRATIONS, "noise": names.NOISE_MODES, "neighbouring": names.NEIGHBOURING_RELATIONS,
        "privacy_unit": names.PRIVACY_UNITS,
    }  # fmt: skip
    seen = set()
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, sub in commands.choices.items():
        for action in sub._actions:
            if action.dest in vocabulary and action.choices is not None:
                assert tuple(action.choices) == vocabulary[action.dest], (command, action.dest)
                seen.add(action.dest)
            if action.dest == "query_selection" and action.choices is not None:
                assert set(action.choices) <= set(names.QUERY_SELECTIONS), command
                seen.add(action.dest)
    assert seen == {*vocabulary, "query_selection"}, seen


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("accelerator", "tpu", "accelerator must be one of auto, cpu, gpu, cuda, mps, got 'tpu'"),
        ("bottom", "ignore", "bottom must be one of drop, random, got 'ignore'"),
        ("student_model", "linear", "student_model must be one of logistic, mlp, cnn, got 'linear'"),
    ],
)
def test_choices_unchecked_before_are_refused(key, value, message):
    """Choices that reached the run unchecked (and failed there, or were passed on) are refused on construction."""
    with pytest.raises(ValueError, match=message):
        TransferConfig(**{key: value})


def test_docs_settings_lists_every_section_and_setting():
    text = (ROOT / "docs" / "settings.md").read_text()
    for name, cls in SECTIONS.items():
        row = f"| `{name}` | `{cls.__name__}` | " + ", ".join(f"`{k}`" for k in cls.keys()) + " |"
        assert row in text, f"docs/settings.md: the row of section {name} is missing or stale"


def test_arrays_config_takes_sections_over_a_config():
    from pate_stab.run.api import arrays_config

    base = TransferConfig(epsilon=3.0, num_teachers=9)
    for given in ({"release": {"epsilon": 2.0}}, {"release": ReleaseSettings(epsilon=2.0)}, {"epsilon": 2.0}):
        config = arrays_config(base, **given)
        assert (config.data.dataset, config.release.epsilon, config.teachers.num_teachers) == ("arrays", 2.0, 9), given

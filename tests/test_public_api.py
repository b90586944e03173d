"""The public API of ``pate_stab/__init__.py``: every name resolves to its defining object, lazily; the
docstring's example runs as written (a doctest), and so does the README's; both use top-level names only.
The public pair (``transfer``, ``compare``) takes one data object and returns typed results; every type the
public functions take or return is exported; the previous names warn and keep working."""

from __future__ import annotations

import ast
import doctest
import importlib
import inspect
import json
import logging
import re
import subprocess
import sys
import types
import typing
import warnings
from pathlib import Path

import pytest
import torch

import pate_stab


def test_every_public_name_is_the_object_its_module_defines():
    for name, module in pate_stab._LAZY.items():
        assert getattr(pate_stab, name) is getattr(importlib.import_module(module), name), name
        assert name in pate_stab.__all__ and name in dir(pate_stab)
    assert callable(pate_stab.load_student)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        pate_stab.nothing_here  # noqa: B018


def test_importing_the_package_loads_no_training_stack():
    code = "import sys, pate_stab; print(any(m.startswith(('lightning', 'pate_stab.run')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_docstring_example_runs():
    from pate_stab.run.progress import STAGE_LOGGER, _StdoutLines

    # the library prints no stage lines; the command line turns them on for its process, which an
    # earlier test in this one may have done
    logger = logging.getLogger(STAGE_LOGGER)
    saved = logger.handlers[:]
    logger.handlers = [h for h in saved if not isinstance(h, _StdoutLines)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            failures, tried = doctest.testmod(pate_stab, optionflags=doctest.ELLIPSIS, raise_on_error=False)
    finally:
        logger.handlers = saved
    assert tried >= 10 and failures == 0


# ---- the public pair, its types and the examples ------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def _tiny_data(n: int = 300, seed: int = 0):
    """Three well-separated classes in 5 dimensions: (x, y) for n private, 100 pool and 100 evaluation rows."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n + 200,), generator=g)
    x = 8.0 * torch.eye(3, 5)[y] + torch.randn(n + 200, 5, generator=g)
    return x, y


def _quick(tmp_path, name: str) -> dict:
    """GNMax over 20 propagation teachers, 30 queries: a run of about a second."""
    return dict(
        aggregator="gnmax",
        teacher_model="propagate",
        num_teachers=20,
        num_queries=30,
        epsilon=8.0,
        student_epochs=2,
        accelerator="cpu",
        progress=False,
        checkpoints_dir=str(tmp_path),
        run_name=name,
    )


def _quiet_stage_lines():
    """The library prints no stage lines; the command line turns them on for its process, which an earlier
    test in this one may have done: (logger, the handlers to restore)."""
    from pate_stab.run.progress import STAGE_LOGGER, _StdoutLines

    logger = logging.getLogger(STAGE_LOGGER)
    saved = logger.handlers[:]
    logger.handlers = [h for h in saved if not isinstance(h, _StdoutLines)]
    return logger, saved


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, re.M | re.S)


def _pate_stab_imports(code: str) -> list[str]:
    """Every pate_stab module the code imports or reaches by attribute (``pate_stab.run.x``), by its full name."""
    tree = ast.parse(code)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pate_stab"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("pate_stab")]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pate_stab":
            value = getattr(pate_stab, node.attr, None)
            if isinstance(value, types.ModuleType) or node.attr not in pate_stab.__all__:
                found.append(f"pate_stab.{node.attr}")
    return found


def test_the_examples_use_only_top_level_names():
    readme = _python_blocks((ROOT / "README.md").read_text())
    assert len(readme) == 1
    doc = "\n".join(ex.source for ex in doctest.DocTestParser().get_examples(pate_stab.__doc__))
    for code in (readme[0], doc):
        assert "pate_stab" in code
        assert set(_pate_stab_imports(code)) <= {"pate_stab"}, _pate_stab_imports(code)


def test_the_readme_example_runs(tmp_path, monkeypatch):
    (code,) = _python_blocks((ROOT / "README.md").read_text())
    monkeypatch.chdir(tmp_path)  # its run folder: checkpoints/my_arrays under the working directory
    logger, saved = _quiet_stage_lines()
    try:
        namespace: dict = {}
        exec(compile(code, "README.md", "exec"), namespace)
    finally:
        logger.handlers = saved
    result = namespace["result"]
    assert isinstance(result, pate_stab.TransferResult) and result.report["status"] == "complete"
    assert (tmp_path / "checkpoints" / "my_arrays" / "student.pt").is_file()
    assert result.student.predict(namespace["x"][:3].numpy()).shape == (3,)


def _walk_types(hint) -> list[type]:
    origin_args = typing.get_args(hint)
    out = [hint] if isinstance(hint, type) else []
    for arg in origin_args:
        out += _walk_types(arg)
    return out


def test_every_type_the_public_functions_take_or_return_is_exported():
    names = {name: getattr(pate_stab, name) for name in pate_stab.__all__ if name != "__version__"}
    functions = [v for v in names.values() if inspect.isfunction(v)]
    functions += [pate_stab.Data.arrays, pate_stab.Data.files, pate_stab.Data.bundled]
    assert {f.__name__ for f in functions} >= {
        "transfer",
        "compare",
        "plan_run",
        "make_releaser",
        "calibrate",
        "load_student",
    }
    missing = set()
    for function in functions:
        hints = typing.get_type_hints(function, localns=names)
        for hint in hints.values():
            for kind in _walk_types(hint):
                if kind.__module__.startswith("pate_stab") and names.get(kind.__name__) is not kind:
                    missing.add(f"{function.__name__}: {kind.__module__}.{kind.__name__}")
    assert not missing, sorted(missing)
    assert typing.get_type_hints(pate_stab.load_student, localns=names)["return"] is pate_stab.PublishedStudent
    for name in (
        "AggregatorSettings",
        "RunPlan",
        "Calibration",
        "TransferResult",
        "CompareResult",
        "PublishedStudent",
        "Data",
    ):
        assert name in pate_stab.__all__ and isinstance(names[name], type), name


def test_transfer_and_compare_take_one_data_object_and_return_typed_results(tmp_path):
    from pate_stab import CompareResult, Data, PublishedStudent, TransferResult, compare, transfer

    x, y = _tiny_data()
    data = Data.arrays((x[:300], y[:300]), x[300:400], (x[400:], y[400:]), classes=3)
    assert data.kind == "arrays" and data.own is not None
    logger, saved = _quiet_stage_lines()
    try:
        result = transfer(data, **_quick(tmp_path, "t"))
        assert isinstance(result, TransferResult) and isinstance(result.student, PublishedStudent)
        assert result.report["status"] == "complete" and result.labels.shape == result.index.shape
        out = compare(
            data, pate_stab.TransferConfig(**_quick(tmp_path, "c")), epsilons=[4.0, 8.0], aggregators=["gnmax", "lnmax"]
        )
    finally:
        logger.handlers = saved
    assert isinstance(out, CompareResult)
    published = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert out.report == published  # the published report, without the table or the private diagnostics
    assert out.table + "\n" == (tmp_path / "c" / "compare.txt").read_text()
    assert "teachers" in out.private and "private" not in out.report
    assert len(out.rows) == 4 and sorted(out.students) == sorted(
        f"{a}_eps{e:g}_r0" for a in ("gnmax", "lnmax") for e in (4.0, 8.0)
    )
    student = out.students["gnmax_eps8_r0"]
    assert isinstance(student, PublishedStudent) and student.predict(x[400:405]).shape == (5,)
    with pytest.raises(KeyError, match="no student 'nothing'.*gnmax_eps4_r0"):
        out.students["nothing"]


def test_config_is_a_transfer_config_a_mapping_or_keywords_checked_against_it(tmp_path):
    from pate_stab import Data, TransferConfig, transfer
    from pate_stab.run.api import run_config

    x, y = _tiny_data()
    data = Data.arrays((x[:300], y[:300]), x[300:400], (x[400:], y[400:]), classes=3)
    with pytest.raises(ValueError, match="unknown configuration keys: epsilonn \\(did you mean epsilon\\?\\)"):
        transfer(data, epsilonn=4.0)  # refused before anything is trained
    with pytest.raises(ValueError, match="unknown configuration keys: teacher_epoch"):
        transfer(data, {"teacher_epoch": 2})
    with pytest.raises(ValueError, match="dataset, private name the data: give them through data"):
        transfer(data, dataset="mnist", private="p.npz")
    with pytest.raises(TypeError, match="config must be a TransferConfig or a mapping"):
        transfer(data, 4.0)
    with pytest.raises(TypeError, match="data must be a Data"):
        transfer((x, y))
    assert not list(tmp_path.iterdir())
    base = TransferConfig(epsilon=2.0, num_teachers=7, dataset="mnist", data_dir="/somewhere")
    config = run_config(data, base, num_queries=11, teachers={"teacher_lr": 0.5})
    assert (config.data.dataset, config.release.epsilon, config.teachers.num_teachers, config.release.num_queries) == (
        "arrays",
        2.0,
        7,
        11,
    )
    assert config.teachers.teacher_lr == 0.5
    assert run_config(data, {"release": {"epsilon": 3.0}}).epsilon == 3.0


def test_data_files_and_bundled_map_onto_the_data_settings(tmp_path):
    from pate_stab import Data
    from pate_stab.run.api import run_config

    files = Data.files(
        tmp_path / "p.csv",
        tmp_path / "pool.csv",
        tmp_path / "e.csv",
        schema=tmp_path / "s.json",
        classes=["no", "yes"],
        pool_labels=True,
    )
    config = run_config(files, num_teachers=5)
    assert (
        config.data.dataset,
        config.data.private,
        config.data.public,
        config.data.evaluation,
        config.data.schema,
    ) == (
        "files",
        str(tmp_path / "p.csv"),
        str(tmp_path / "pool.csv"),
        str(tmp_path / "e.csv"),
        str(tmp_path / "s.json"),
    )
    assert (
        config.data.classes == ("no", "yes") and config.data.pool_labels is True and config.teachers.num_teachers == 5
    )
    adult = run_config(Data.bundled("adult", data_dir=tmp_path))
    assert (adult.dataset, adult.data_dir) == ("adult", str(tmp_path)) and run_config("adult").dataset == "adult"
    with pytest.raises(ValueError, match="unknown bundled data set 'imagenet'; choose from synthetic, mnist"):
        Data.bundled("imagenet")
    with pytest.raises(ValueError, match="private, public apply to dataset 'files' only"):  # a config naming files
        run_config("adult", {"dataset": "files", "private": "p.csv", "public": "q.csv"})


def test_a_direct_learner_through_transfer_releases_its_model(tmp_path):
    from pate_stab import Data, transfer

    x, y = _tiny_data()
    data = Data.arrays((x[:300], y[:300]), x[300:400], (x[400:], y[400:]), classes=3)
    logger, saved = _quiet_stage_lines()
    try:
        result = transfer(data, **{**_quick(tmp_path, "d"), "aggregator": "output-softmax", "private_size_hint": 300})
    finally:
        logger.handlers = saved
    assert result.release is None and result.report["kind"] == "direct"
    assert result.student.predict(x[400:410]).shape == (10,)
    with pytest.raises(ValueError, match="'output-softmax' is a direct learner: its model is the release"):
        result.labels  # noqa: B018


def test_the_previous_names_warn_and_keep_their_return_shapes(tmp_path):
    import pate_stab.run

    x, y = _tiny_data()
    arrays = ((x[:300], y[:300]), x[300:400], (x[400:], y[400:]))
    assert not {"transfer_arrays", "compare_arrays", "run_transfer"} & set(pate_stab.__all__)
    logger, saved = _quiet_stage_lines()
    try:
        with pytest.warns(DeprecationWarning, match="transfer_arrays is deprecated.*pate_stab.transfer"):
            result = pate_stab.transfer_arrays(*arrays, classes=3, **_quick(tmp_path, "old"))
        assert isinstance(result, pate_stab.TransferResult) and result.report["status"] == "complete"
        assert pate_stab.run.transfer_arrays is pate_stab.transfer_arrays
        with pytest.warns(DeprecationWarning, match="compare_arrays is deprecated.*pate_stab.compare"):
            out = pate_stab.compare_arrays(
                *arrays, classes=3, epsilons=[8.0], aggregators=["gnmax"], **_quick(tmp_path, "old_c")
            )
        assert isinstance(out, dict) and {"rows", "table", "private"} <= set(out)
        config = result.prep.config
        with pytest.warns(DeprecationWarning, match="pate_stab.run_transfer is deprecated.*pate_stab.transfer"):
            report = pate_stab.run_transfer(config, data=_own(arrays))
        assert isinstance(report, dict) and report["status"] == "complete"  # the same run, resumed
    finally:
        logger.handlers = saved
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the pipeline's own run_transfer does not warn
        assert pate_stab.run.run_transfer.__module__ == "pate_stab.run.transfer"


def _own(arrays):
    from pate_stab.data.own import own_data

    return own_data(*arrays, classes=3)


def test_the_run_package_exports_only_the_pipeline():
    import pate_stab.run

    for name in pate_stab.run.__all__:
        assert getattr(pate_stab.run, name) is not None
    helpers = (
        "clean_json",
        "open_ledger",
        "transfer_report",
        "label_accuracy",
        "teacher_accuracies",
        "format_rows",
        "plot_rows",
        "DATASETS",
        "STUDENT_FIELDS",
    )
    for name in helpers:
        assert name not in pate_stab.run.__all__
        with pytest.raises(AttributeError):
            getattr(pate_stab.run, name)
    assert {"TransferConfig", "run_transfer", "run_compare", "TransferResult"} <= set(pate_stab.run.__all__)

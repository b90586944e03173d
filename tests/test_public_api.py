"""The public API of ``pate_stab/__init__.py``: every name resolves to its defining object, lazily, and
the docstring's example runs as written (a doctest)."""

from __future__ import annotations

import doctest
import importlib
import logging
import subprocess
import sys
import warnings

import pytest

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

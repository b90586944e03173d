"""Progress shown to the user: whether to draw bars, and one line per finished stage.

Bars (tqdm and Lightning's) are drawn in an interactive terminal only (:func:`default_progress`).
Stage lines are plain text and always printed by the command line, also under ``--no-progress``
and into a pipe or log file: each stage of ``transfer`` and ``compare`` (data, features,
partition, teachers, votes, release, student, data-dependent ε, report; a direct learner) ends
with one line ``stage <name>: <wall time> s on <device>`` (:func:`report_stage`). The library
emits them on the ``pate_stab.stages`` logger at INFO; ``pate-stab`` prints that logger to
standard output, flushed line by line (:func:`print_stage_lines`); a program using the library
sees them only if it configures that logger.

The times are wall-clock times of stages that read the private data, so they are statistics of
it (DESIGN.md fact 8): runs keep them in their private diagnostics file (``wall_time_s`` and
``stage_device`` of ``private_diagnostics.json`` / ``private_compare.json``), never in a
published file; the terminal shows them to the user who ran the job.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import TextIO

import torch

__all__ = ["STAGE_LOGGER", "accelerator_device", "compute_device", "default_progress", "print_stage_lines",
           "report_stage", "stage_line"]  # fmt: skip

STAGE_LOGGER = "pate_stab.stages"

_FALSE = ("", "0", "false", "no", "off")


def default_progress(*, stream: TextIO | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """True when ``stream`` (default ``sys.stdout``) is a terminal and ``CI`` is not set.

    Bars (tqdm and Lightning's) are shown when a person is watching; a log file, a pipe and CI
    services (which set ``CI``, e.g. ``CI=true``) get none. ``CI`` counts as set unless it is
    empty or one of "0", "false", "no", "off" (any case).

    Args:
        stream: the stream whose terminal-ness decides (default ``sys.stdout``).
        environ: the environment (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    if env.get("CI", "").strip().lower() not in _FALSE:
        return False
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def accelerator_device(accelerator: str) -> str:
    """The device type a Lightning fit (or the DP-SGD learner) with ``accelerator`` runs on:
    ``cpu``, ``cuda`` or ``mps``. ``auto`` is resolved as Lightning resolves it (MPS, then CUDA,
    then the CPU); other names are returned as given."""
    name = str(accelerator).lower()
    if name in ("gpu", "cuda"):
        return "cuda"
    if name == "auto":
        if torch.backends.mps.is_available():
            return "mps"
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def compute_device(accelerator: str) -> str:
    """Where the run's tensor stages (features, PCA, graph, propagation teachers, votes) compute:
    ``cuda`` when ``accelerator`` resolves to CUDA (:func:`accelerator_device`), the CPU otherwise
    (MPS lacks the float64 and sparse kernels these stages use)."""
    return "cuda" if accelerator_device(accelerator) == "cuda" else "cpu"


def stage_line(name: str, seconds: float, device: str) -> str:
    """``stage teachers: 41.2 s on cpu``."""
    return f"stage {name}: {seconds:.1f} s on {device}"


def report_stage(
    timings: MutableMapping[str, float],
    name: str,
    seconds: float,
    device: str,
    devices: MutableMapping[str, str] | None = None,
) -> None:
    """Record a finished stage's wall time (and device) and emit its line on :data:`STAGE_LOGGER`."""
    timings[name] = seconds
    if devices is not None:
        devices[name] = device
    logging.getLogger(STAGE_LOGGER).info(stage_line(name, seconds, device))


class _StdoutLines(logging.Handler):
    """Each record as one line on the *current* ``sys.stdout``, flushed at once (a pipe or a log
    file gets every line as its stage ends)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.format(record), file=sys.stdout, flush=True)
        except Exception:  # pragma: no cover - a closed stream must not end the run
            self.handleError(record)


def print_stage_lines() -> None:
    """Print the stage lines to standard output (the command line's choice; idempotent)."""
    logger = logging.getLogger(STAGE_LOGGER)
    logger.setLevel(logging.INFO)
    if not any(isinstance(h, _StdoutLines) for h in logger.handlers):
        logger.addHandler(_StdoutLines())
    logger.propagate = False

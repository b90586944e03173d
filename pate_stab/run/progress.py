"""Whether to show progress bars by default: in an interactive terminal, not in CI or a pipe."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

__all__ = ["default_progress"]

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

"""BTT18 PAC curves: the log-log panel that ``recipes/repro/pac_rates.py`` and ``pac_curves.py`` draw.

Error against the private sample size n on log-log axes: measured curves with error bars
(means over seeds), reference lines (a bound, a theorem's rate, a non-private ERM), one legend.
It plots numbers already computed from the simulations' outputs (synthetic data; nothing
private is read here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["loglog_panel"]


def loglog_panel(
    ax: Any,
    curves: Sequence[dict[str, Any]],
    lines: Sequence[dict[str, Any]] = (),
    *,
    title: str,
    xlabel: str,
    ylabel: str | None = None,
    legend_fontsize: float = 7,
) -> None:
    """Draw one panel on a matplotlib ``ax`` (the caller owns the figure and its Agg backend).

    ``curves``: keyword sets for ``ax.errorbar`` (``x``, ``y``, ``yerr``, ``label`` and any
    style keys), drawn in order; ``lines``: keyword sets for ``ax.plot`` (``x``, ``y``, an
    optional format string ``fmt`` and style keys), drawn after them. Both axes are logarithmic.
    """
    for c in curves:
        kw = dict(c)
        ax.errorbar(kw.pop("x"), kw.pop("y"), **kw)
    for line in lines:
        kw = dict(line)
        x, y = kw.pop("x"), kw.pop("y")
        fmt = kw.pop("fmt", None)
        if fmt is None:
            ax.plot(x, y, **kw)
        else:
            ax.plot(x, y, fmt, **kw)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.legend(fontsize=legend_fontsize)

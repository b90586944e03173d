"""Output a non-specialist can read: the compare table leaves out columns empty in every row (and
their legend sentences), a row's note is one plain sentence, and the plot's legend hides no line."""

from __future__ import annotations

import matplotlib.pyplot as plt

from pate_stab.run.compare_table import format_rows, plot_rows


def _row(agg, eps, acc, **extra):
    row = {"aggregator": agg, "target_epsilon": eps, "epsilon": eps, "delta": 1e-5, "seen": 100, "answered": 100,
           "label_acc": None, "student_acc": acc, "epsilon_dd_sanitised": None, "noise": "secure"}  # fmt: skip
    return {**row, **extra}


def test_columns_empty_in_every_row_are_left_out_with_their_legend():
    jargon = "raw only: discrete Gaussian q bound (sub-Gaussian tails); no smooth-sensitivity sanitisation"
    rows = [_row("gnmax", 2.0, 0.7, data_dependent_note=jargon), _row("lnmax", 2.0, 0.71)]
    table = format_rows(rows)
    head = table.splitlines()[0]
    assert "ε dd san" not in head and "label_acc" not in head and "student_acc" in head
    assert "ε dd san:" not in table and "label accuracy" not in table  # no footnote for a column not shown
    assert "sub-Gaussian" not in table
    shown = format_rows([_row("gnmax", 2.0, 0.7, data_dependent_note=jargon, label_acc=0.9),
                         _row("gnmax", 4.0, 0.7, epsilon_dd_sanitised=1.5)])  # fmt: skip
    assert "ε dd san" in shown.splitlines()[0] and "label_acc" in shown.splitlines()[0]
    from pate_stab.run.compare_table import DD_ROW_NOTE

    assert DD_ROW_NOTE in shown and "sub-Gaussian" not in shown and "label accuracy" in shown


def test_plot_legend_lies_outside_the_axes(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    rows = [_row(agg, eps, acc) for agg, base in (("gnmax", 0.7), ("lnmax", 0.72), ("dpsgd-linear", 0.74))
            for eps, acc in ((2.0, base), (4.0, base + 0.01), (8.0, base + 0.02))]  # fmt: skip
    plot_rows(rows, tmp_path / "p.png", title="t")
    (fig,) = figures
    fig.canvas.draw()
    ax = fig.axes[0]
    legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= box.x1  # to the right of the plotting area: it covers no line


def test_direct_legend_names_only_columns_the_table_shows():
    from pate_stab.run.direct import direct_legend

    rows = [_row("gnmax", 2.0, 0.7), _row("dpsgd-linear", 2.0, 0.72, neighbouring="add_remove")]
    legend = direct_legend(rows, run_neighbouring="add_remove")
    assert "label_acc" not in legend and "unlabelled pool" not in legend and "seen / answered are '-'" in legend

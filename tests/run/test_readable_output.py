"""Output a non-specialist can read: the compare table leaves out columns empty in every row (and
their legend sentences), a row's note is one plain sentence, and the plot's legend hides no line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.pyplot as plt

from pate_stab.run import TransferConfig
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


def _readme_headings() -> list[str]:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    return [line.lstrip("#").strip() for line in readme.read_text().splitlines() if line.startswith("#")]


def _assert_plain_sentence(note: str, headings: list[str]) -> None:
    """One sentence (capital or ε first, no ';', no sentence break inside), ending with a pointer to a
    README heading."""
    match = re.fullmatch(r"[A-Zε][^;]*\(README: ([^()]+)\)\.", note)
    assert match, f"not one plain sentence with a README pointer: {note!r}"
    assert ". " not in note[: match.start(1)], f"more than one sentence: {note!r}"
    assert any(h.startswith(match.group(1)) for h in headings), f"no README section {match.group(1)!r}"


def test_every_note_of_a_compare_is_one_sentence_with_a_readme_pointer(tmp_path):
    """A small compare with releasers and direct learners (a head with exact noise, one with float
    noise, DP-SGD): each row's note, each published data-dependent note and each note the table shows
    is one plain sentence ending with a pointer to a section that README.md has; the parameters stay
    in the rows' own fields."""
    from pate_stab.run.compare import run_compare

    cfg = TransferConfig(
        run_name="notes", checkpoints_dir=str(tmp_path), num_private=3000, num_public=400, num_eval=300, dim=6,
        num_classes=3, separation=6.0, num_teachers=5, teacher_model="propagate", graph_pca_dim=None,
        num_queries=50, accelerator="cpu", private_size_hint=3000,
    )  # fmt: skip
    out = run_compare(cfg, epsilons=[8.0], aggregators=["stability", "gnmax", "lnmax"],
                      direct=["output-softmax", "objective-ovr", "dpsgd-linear"])  # fmt: skip
    headings = _readme_headings()
    rows = {r["aggregator"]: r for r in out["rows"]}
    notes = [r["note"] for r in out["rows"] if r["note"]]
    notes += [r["data_dependent_note"] for r in out["rows"] if r.get("data_dependent_note")]
    assert len(notes) >= len(out["rows"])  # every direct row has a note, every releaser a data-dependent one
    for note in notes:
        _assert_plain_sentence(note, headings)
    # the rows' notes, the legend, the total cost and the direct rows' legend: each line that points to the README
    table_notes = [line.split("  ")[-1] for line in out["table"].splitlines() if "(README:" in line]
    assert len(table_notes) >= len([n for n in notes if n in out["table"]]) + 5
    assert all(n in out["table"] for n in (r["note"] for r in out["rows"]) if n)
    for note in table_notes:
        _assert_plain_sentence(note.strip(), headings)
    # the technical parameters are kept in their own fields, not lost with the old notes
    dp = rows["dpsgd-linear"]["settings"]
    assert {"noise_multiplier", "sample_rate", "steps", "noise_kind", "secure_mode"} <= set(dp)
    assert dp["dpsgd"]["max_grad_norm"] > 0 and "σ=" not in rows["dpsgd-linear"]["note"]
    assert {"lam", "feature_bound", "noise_kind"} <= set(rows["output-softmax"]["settings"])
    if rows["stability"]["note"]:  # unanswerable at this k: the k and ε it needs are fields
        assert rows["stability"]["teachers_needed"] > cfg.num_teachers and "epsilon_needed" in rows["stability"]
    assert json.loads((cfg.run_dir / "compare.json").read_text())["rows"][0]["note"] == out["rows"][0]["note"]


def test_partial_release_note_is_one_sentence_with_a_readme_pointer():
    from pate_stab.run.release import PARTIAL_RELEASE_NOTE

    _assert_plain_sentence(PARTIAL_RELEASE_NOTE, _readme_headings())

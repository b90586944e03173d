"""The reproduced papers' figures, redrawn in each paper's layout from the recorded run outputs.

Reads only the files in ``docs/results/repro/`` that the reproduction recipes wrote (no rerun):

* ``cv2013_magic.json`` / ``cv2013_adult.json`` (``recipes/repro/chaudhuri_vinterbo2013.py``) ->
  ``cv2013_fig1.png``: Chaudhuri & Vinterbo 2013 Fig. 1, (a) AUC and (b) MSE against alpha, one
  facet per data set (Adult, Magic), the five methods, error bars the 95 % interval of the mean
  (the paper: bootstrap; here mean ± 1.96 s.e. from the recorded summary), alpha on a log axis
  with the paper's ticks 0.3 ... 5.0. The paper's protocol (its scaling) is drawn solid; the
  hypothesis rows (``alphaSplit-rate``, ``dataSplit-rate``) dashed. ``cv2013_adult.json`` also
  gives ``cv2013_fig1_adult_protocols.png``: the Adult facet under each recorded scaling.
* ``ligett2017_ridge.json`` / ``ligett2017_kdd.json`` (``recipes/repro/accuracy_first.py figure``) ->
  ``ligett2017_fig1.png``: Ligett et al. 2017 Fig. 1, ex-post privacy loss epsilon against the
  input alpha; left ridge (Twitter; here the stand-in), right logistic (KDD-99); top Noise
  Reduction against the theory approach, bottom against Doubling (the layout of their caption).
  The e^eps values the paper prints in Sec. 4 are marked with crosses.
* ``wu2016_warfarin.json`` (``recipes/repro/wu2016.py``) -> ``wu2016_fig1.png`` (MSE against
  epsilon: non-private, Tuned R1, Oracle, Data-Independent; one panel per scaling protocol) and
  ``wu2016_fig2.png`` (Data-Independent against Oracle with the paper's 0.1 gap drawn above
  Oracle). Mean ± s.d. over the recorded splits.
* ``pac_rates.json``, ``pac_rates_halfspace.json``, ``pac_rates_halfspace_agnostic.json``
  (``recipes/repro/pac_rates.py``) -> ``btt18_rates.png``: BTT18 has no experiment figure; this is
  the log-log error of h_priv and of the student against n, one panel per class and setting, with
  Cor 4.1's T/m and the theorem's exponent drawn as a reference line through the first measured
  point. (The superseded 3-seed sweep of ``pac_curves.py`` keeps its own ``btt18_<class>_<setting>.png``.)

The text extractions of the papers do not give the axis scales; the log axes here (alpha,
epsilon, MSE of Wu et al. Fig. 1 which spans four decades) are chosen, not read.

    python recipes/repro/plots.py

takes a few seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2] / "docs" / "results" / "repro"
CV_ALPHAS = [0.3, 0.5, 1.0, 2.0, 3.0, 5.0]
CV_METHODS = ["Stability", "alphaSplit", "dataSplit", "Random", "Control"]
CV_COLORS = {"Stability": "C0", "alphaSplit": "C1", "dataSplit": "C2", "Random": "C3", "Control": "C4"}
# Ligett et al. 2017, Sec. 4 (text beside Fig. 1a/1c): e^eps of Noise Reduction / Doubling at
# alpha = 0.05 and 0.075 on Twitter.
LIGETT_PRINTED = {"noise_reduction": {0.05: 10.0, 0.075: 4.65}, "doubling": {0.05: 495.0, 0.075: 56.6}}
# Wu et al. 2016, Sec. 5.2 / Fig. 2: "the maximum MSE gap we observed is only 0.1".
WU_GAP = 0.1


def _save(fig: Any, path: Path, title: str, *, bottom: float, top: float) -> Path:
    """Title ``fig``, lay it out between ``bottom`` and ``top`` (figure fractions), write it to
    ``path`` at 120 dpi and close it."""
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, bottom, 1, top))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def cv_figure(root: Path) -> Path:
    """Chaudhuri & Vinterbo 2013 Fig. 1: rows (a) AUC, (b) MSE; columns Adult, Magic."""
    panels = [(name, root / f"cv2013_{name.lower()}.json") for name in ("Adult", "Magic")]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5), sharex=True)
    for col, (name, path) in enumerate(panels):
        summary = json.loads(path.read_text())["summary"] if path.exists() else None
        for row, metric in enumerate(("auc", "mse")):
            ax = axes[row, col]
            ax.set_xscale("log")
            ax.set_xticks(CV_ALPHAS, [str(a) for a in CV_ALPHAS])
            ax.minorticks_off()
            runs = summary["paper/Control/0.3"]["runs"] if summary else 0
            ax.set_title(f"({'ab'[row]}) {name}: {metric.upper()} ({runs} CV rounds)", fontsize=10)
            if summary is None:
                ax.text(0.5, 0.5, f"{path.name} not recorded", ha="center", transform=ax.transAxes)
                continue
            for j, method in enumerate(CV_METHODS + ["alphaSplit-rate", "dataSplit-rate"]):
                cells = [summary.get(f"paper/{method}/{a}") for a in CV_ALPHAS]
                if any(c is None for c in cells):
                    continue
                jitter = [a * math.exp(0.03 * (j - 3)) for a in CV_ALPHAS]  # the paper jitters too
                base = method.removesuffix("-rate")
                ax.errorbar(
                    jitter,
                    [c[metric] for c in cells],
                    yerr=[1.96 * c[metric + "_se"] for c in cells],
                    color=CV_COLORS[base],
                    linestyle="--" if method.endswith("-rate") else "-",
                    marker="o" if not method.endswith("-rate") else "x",
                    markersize=4,
                    capsize=2,
                    alpha=0.6 if method.endswith("-rate") else 1.0,
                    label=method + (" (hypothesis)" if method.endswith("-rate") else ""),
                )
            ax.set_ylim(*((0.55, 0.88) if metric == "auc" else (0.09, 0.26)))
        axes[1, col].set_xlabel("alpha")
    axes[0, 0].set_ylabel("AUC")
    axes[1, 0].set_ylabel("MSE (probability scale)")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8)
    return _save(
        fig,
        root / "cv2013_fig1.png",
        "Chaudhuri & Vinterbo 2013, Fig. 1 layout: paper protocol (not private: as in the paper), "
        "mean and 95 % interval",
        bottom=0.07,
        top=0.96,
    )


def cv_adult_protocols(root: Path) -> Path | None:
    """Adult under each recorded protocol (paper min-max, paper z-score hypothesis, private), Fig. 1 axes."""
    path = root / "cv2013_adult.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())["summary"]
    protocols = [p for p in ("paper", "paper-zscore", "private") if f"{p}/Control/0.3" in summary]
    fig, axes = plt.subplots(2, len(protocols), figsize=(4.5 * len(protocols), 7), sharex=True, squeeze=False)
    for col, protocol in enumerate(protocols):
        for row, metric in enumerate(("auc", "mse")):
            ax = axes[row, col]
            for j, method in enumerate(CV_METHODS):
                cells = [summary[f"{protocol}/{method}/{a}"] for a in CV_ALPHAS]
                ax.errorbar([a * math.exp(0.03 * (j - 2)) for a in CV_ALPHAS], [c[metric] for c in cells],
                            yerr=[1.96 * c[metric + "_se"] for c in cells], color=CV_COLORS[method], marker="o",
                            markersize=4, capsize=2, label=method)  # fmt: skip
            ax.set_xscale("log")
            ax.set_xticks(CV_ALPHAS, [str(a) for a in CV_ALPHAS])
            ax.minorticks_off()
            runs = summary[f"{protocol}/Control/0.3"]["runs"]
            ax.set_title(f"Adult, {protocol}: {metric.upper()} ({runs} CV rounds)", fontsize=9)
        axes[1, col].set_xlabel("alpha")
    axes[0, 0].legend(fontsize=7)
    return _save(
        fig,
        root / "cv2013_fig1_adult_protocols.png",
        "Chaudhuri & Vinterbo 2013 Fig. 1, Adult panel under three scalings",
        bottom=0.0,
        top=0.95,
    )


def ligett_figure(root: Path) -> Path:
    """Ligett et al. 2017 Fig. 1: (a)/(c) ridge left, (b)/(d) logistic right; theory top, Doubling bottom."""
    ridge = json.loads((root / "ligett2017_ridge.json").read_text())["summary"]
    kdd = json.loads((root / "ligett2017_kdd.json").read_text())["summary"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    columns = [
        ("twitter-standin", ridge, "ridge, Twitter: SYNTHETIC STAND-IN (n = 1e5, p = 77; dotted: no union bound)"),
        ("kdd", kdd, "logistic, KDD-99 (public caps; dotted: paper's normalisation)"),
    ]
    for col, (dataset, summary, title) in enumerate(columns):
        for row, other in enumerate(("theory", "doubling")):
            ax = axes[row, col]
            for method, style in (("noise_reduction", "o-"), (other, "s--")):
                rows = sorted((r for r in summary if r["dataset"] == dataset and r["method"] == method),
                              key=lambda r: r["alpha"])  # fmt: skip
                ax.plot([r["alpha"] for r in rows], [r["mean_epsilon"] for r in rows], style,
                        label={"noise_reduction": "Noise Reduction", "theory": "theory approach",
                               "doubling": "Doubling"}[method] + " (measured)")  # fmt: skip
                if dataset == "twitter-standin" and method in LIGETT_PRINTED:
                    printed = LIGETT_PRINTED[method]
                    label = f"paper, Sec. 4 ({method.replace('_', ' ')})"
                    color = ax.lines[-1].get_color()
                    ax.plot(list(printed), [math.log(v) for v in printed.values()], "x", ms=9, color=color, label=label)
            extra = {
                "twitter-standin": ("ligett2017_ridge_nounion.json", "union bound dropped for both, post hoc"),
                "kdd": ("ligett2017_kdd_paper.json", "paper's normalisation, not private"),
            }[dataset]
            if (root / extra[0]).exists():
                more = json.loads((root / extra[0]).read_text())["summary"]
                for method, style in (("noise_reduction", "o:"), (other, "s:")):
                    rows = sorted((r for r in more if r["method"] == method), key=lambda r: r["alpha"])
                    ax.plot([r["alpha"] for r in rows], [r["mean_epsilon"] for r in rows], style, alpha=0.7,
                            label={"noise_reduction": "Noise Reduction", "theory": "theory approach",
                                   "doubling": "Doubling"}[method] + f" ({extra[1]})")  # fmt: skip
            ax.set_title(textwrap.fill(f"({'abcd'[2 * row + col]}) {title}: NR vs {other}", 60), fontsize=9)
            ax.set_xlabel("input alpha (excess error guarantee)")
            ax.set_ylabel("ex-post privacy loss epsilon")
            ax.legend(fontsize=7)
    return _save(
        fig,
        root / "ligett2017_fig1.png",
        "Ligett et al. 2017, Fig. 1 layout (mean over 80 / 40 trials)",
        bottom=0.0,
        top=0.96,
    )


def _wu_series(res: dict, method: str, eps: list[float]) -> tuple[list[float], list[float]]:
    cells = [res["summary"][f"{method}/{e}"] for e in eps]
    return [c["mean"] for c in cells], [c["std"] for c in cells]


def wu_figures(root: Path) -> list[Path]:
    """Wu et al. 2016 Fig. 1 (all output perturbations against non-private) and Fig. 2 (DI vs Oracle)."""
    rec = json.loads((root / "wu2016_warfarin.json").read_text())
    eps = rec["epsilons"]
    protocols = [p for p in ("paper", "paper-centered", "private", "private-centered") if p in rec["results"]]
    outs = []
    for fig_no, methods in (
        (1, ["NonPrivate", "Tuned-R1", "Oracle", "DataIndependent"]),
        (2, ["DataIndependent", "Oracle"]),
    ):
        fig, axes = plt.subplots(1, len(protocols), figsize=(4.2 * len(protocols), 4), squeeze=False)
        for ax, protocol in zip(axes[0], protocols, strict=True):
            res = rec["results"][protocol]
            for method in methods:
                mean, sd = _wu_series(res, method, eps)
                label = {"Tuned-R1": "Out R1 (Tuned)", "DataIndependent": "Data-Independent"}.get(method, method)
                ax.errorbar(eps, mean, yerr=sd, marker="o", markersize=4, capsize=2, label=label)
            if fig_no == 2:
                oracle, _ = _wu_series(res, "Oracle", eps)
                ax.plot(eps, [v + WU_GAP for v in oracle], "k:", label="Oracle + 0.1 (paper's max gap)")
            else:
                ax.set_yscale("log")
            ax.set_xscale("log")
            ax.set_xticks(eps, [str(e) for e in eps])
            ax.minorticks_off()
            ax.set_xlabel("epsilon")
            ax.set_ylabel("test MSE (protocol's dose scale)")
            ax.set_title(f"{protocol} (d = {res['d']})", fontsize=9)
            ax.legend(fontsize=7)
        out = _save(
            fig,
            root / f"wu2016_fig{fig_no}.png",
            f"Wu et al. 2016, Fig. {fig_no} layout: IWPC warfarin, rls-out, mean ± s.d. over random 80/20 splits",
            bottom=0.0,
            top=0.93,
        )
        outs.append(out)
    return outs


def wu_added_figure(root: Path) -> list[Path]:
    """Wu et al. 2016 Fig. 1 with the Functional Mechanism and Tuned R2, and Fig. 7 (``wu2016_added.json``)."""
    path = root / "wu2016_added.json"
    if not path.exists():
        return []
    rec = json.loads(path.read_text())
    eps = rec["epsilons"]
    protocols = [p for p in ("paper", "paper-centered", "private", "private-centered") if p in rec["results"]]
    has7 = bool(rec.get("fig7"))
    fig, axes = plt.subplots(1, len(protocols) + has7, figsize=(4.2 * (len(protocols) + has7), 4), squeeze=False)
    for ax, protocol in zip(axes[0], protocols, strict=False):
        res = rec["results"][protocol]
        for method in ("NonPrivate", "FM", "Oracle", "DataIndependent", "Tuned-R2", "Tuned-R2-exact", "Oracle-expnorm"):
            mean, sd = _wu_series(res, method, eps)
            ls = ":" if method.endswith("expnorm") else "-"
            label = method + (" (post hoc, not DP)" if method.endswith("expnorm") else "")
            ax.errorbar(eps, mean, yerr=sd, marker="o", markersize=4, capsize=2, ls=ls, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(eps, [str(e) for e in eps])
        ax.minorticks_off()
        ax.set_xlabel("epsilon")
        ax.set_ylabel("test MSE (protocol's dose scale)")
        ax.set_title(f"{protocol}: FM vs output perturbation", fontsize=9)
        ax.legend(fontsize=6)
    if has7:
        f7 = rec["fig7"]
        ax = axes[0][-1]
        for utility, rows in f7["summary"].items():
            rates = sorted(rows, key=float)
            ax.errorbar([float(r) for r in rates], [rows[r]["mean"] for r in rates],
                        yerr=[1.96 * rows[r]["se"] for r in rates], marker="o", capsize=2,
                        label=f"Tuned R1, {utility} Δu")  # fmt: skip
        ax.set_xlabel("chunk rate r")
        ax.set_ylabel("test MSE (scaled dose)")
        ax.set_title(f"Fig. 7 ({f7['protocol']}, eps_p = {f7['epsilon']}); paper: 5.05 -> 2.9, no unit", fontsize=9)
        ax.legend(fontsize=7)
    return [
        _save(
            fig,
            root / "wu2016_fig1_fm.png",
            "Wu et al. 2016: Functional Mechanism and Tuned R2 beside Oracle / Data-Independent; Fig. 7",
            bottom=0.0,
            top=0.93,
        )
    ]


BTT18_RUNS = ("pac_rates.json", "pac_rates_halfspace.json", "pac_rates_halfspace_agnostic.json")


def btt18_figure(root: Path) -> Path:
    """BTT18 rates from the ``recipes/repro/pac_rates.py`` sweep: h_priv and student error against n.

    One panel per class and setting of the recorded runs (:data:`BTT18_RUNS`): means over seeds
    with 95 % intervals of the mean (± 1.96 s.e.), Cor 4.1's T/m (minus 3γ when agnostic), and the
    theorem's exponent as a line through the first h_priv point; the legend gives each slope with
    its bootstrap interval (or "indicative" where the recipe marks it so).
    """
    reports = [json.loads((root / name).read_text()) for name in BTT18_RUNS if (root / name).exists()]
    groups = [
        (rep, cls, setting)
        for rep in reports
        for cls, setting in sorted({(s["class"], s["setting"]) for s in rep["summary"] if s.get("usable")})
    ]
    exponent = {"realizable": -2 / 3, "agnostic": -2 / 5}
    cols = 3
    nrows = max(1, math.ceil(len(groups) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(12, 3.6 * nrows), squeeze=False)
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for (rep, cls, setting), ax in zip(groups, axes.flat, strict=False):
        pts = sorted(
            (s for s in rep["summary"] if (s["class"], s["setting"]) == (cls, setting) and s.get("usable")),
            key=lambda s: s["n"],
        )
        ns = [p["n"] for p in pts]
        for metric, name, fmt in (("priv_disagree", "h_priv", "o-"), ("student_disagree", "student", "s--")):
            sl = next(x for x in rep["slopes"] if (x["class"], x["setting"], x["metric"]) == (cls, setting, metric))
            ci = (
                f"[{sl['ci_low']:+.2f}, {sl['ci_high']:+.2f}]" if sl.get("interval_supported", True) else "(indicative)"
            )
            ax.errorbar(ns, [p[f"{metric}_mean"] for p in pts], yerr=[1.96 * p[f"{metric}_se"] for p in pts],
                        fmt=fmt, markersize=4, capsize=2, label=f"{name} {sl['slope']:+.2f} {ci}")  # fmt: skip
        ax.plot(ns, [p["bound_T_over_m"] for p in pts], "k-", lw=0.8,
                label="Cor 4.1 T/m" + ("" if setting == "realizable" else " − 3γ"))  # fmt: skip
        e0 = pts[0]["priv_disagree_mean"]
        ax.plot([ns[0], ns[-1]], [e0 * (n / ns[0]) ** exponent[setting] for n in (ns[0], ns[-1])], "k:",
                label=f"theorem exponent {exponent[setting]:+.3f}")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        seeds = sorted({int(p["seeds"]) for p in pts})
        seed_text = f"{seeds[0]} seeds" if len(seeds) == 1 else f"{seeds[-1]}–{seeds[0]} seeds"
        ax.set_title(f"{cls}, {setting} ({seed_text})", fontsize=9)
        ax.set_xlabel("n (private sample)")
        ax.set_ylabel("disagreement with the target")
        ax.legend(fontsize=6)
    return _save(
        fig,
        root / "btt18_rates.png",
        "BTT18 Cor 4.1, Thm 4.3/4.4 (h_priv), 4.6/4.7 (student): error against n (recipes/repro/pac_rates.py)",
        bottom=0.0,
        top=0.95,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(ROOT), help="folder with the recorded outputs; the PNGs go there too")
    args = ap.parse_args()
    root = Path(args.root)
    for out in [
        cv_figure(root),
        cv_adult_protocols(root),
        ligett_figure(root),
        *wu_figures(root),
        *wu_added_figure(root),
        btt18_figure(root),
    ]:
        if out is not None:
            print(out)


if __name__ == "__main__":
    main()

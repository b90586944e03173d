"""Accuracy-first ERM (Ligett et al. 2017): one run for a target α, and their Fig. 1 shape.

One run (wire-able into the ``pate-stab`` CLI)::

    python recipes/repro/accuracy_first.py run --dataset warfarin --alpha 0.05 --data-root ../shared/data

Figure 1 shape (average ex-post privacy loss vs α for Noise Reduction, Doubling and Theory)::

    python recipes/repro/accuracy_first.py figure --data-root ../shared/data --trials 20

The paper's protocol (App. B.1: 80 trials for ridge, 40 for KDD-99) beside the private one, with
the commands and wall times (ridge on three data sets 627 s, KDD 178 s, one thread):
docs/results/repro/README.md.

writes ``checkpoints/<run>/accuracy_first.csv``, ``fig1.png`` and ``report.json``. The default
(4 values of α, 20 trials, n = 100,000 for KDD) takes about 3 CPU-minutes; KDD dominates
(OutputNR evaluates L(θ_t) on all n rows for up to T hypotheses). ``--alphas``, ``--trials``,
``--levels`` and ``--kdd-n`` trade time for resolution.

Data and the ℓ1 contract (||x_i||_1 <= 1, fixed public bounds, nothing read from the data):

* ``warfarin`` (ridge, CovNR): :func:`pate_stab.data.tabular.load_warfarin_iwpc` rows are
  raw/3 where the raw encoding has 9 groups each in [0, 1] (bias, age, height, weight, VKORC1,
  CYP2C9, race, inducer, amiodarone), so ||raw||_1 <= 9 and the loaded rows are divided by 3
  more. Targets y = min(dose, 140)/70 − 1 ∈ [−1, 1]. n = 3564, p = 17.
* ``kdd`` (logistic, OutputNR): KDD-99 10%, the 3 text columns dropped (38 numeric features, as
  in the paper), labels +1 for any attack and −1 for "normal.". Each count-like column c is
  mapped to min(1, log(1 + x)/log(1 + cap_c)) with caps from the KDD-99 feature descriptions
  (durations 1e5 s, byte counts 1e9, connection counts 511, host counts 255, small counters
  listed in ``_KDD_CAPS``); rate columns are already in [0, 1]. Each of the 38 features is then
  in [0, 1], so dividing by 38 gives ||x||_1 <= 1. (The paper divided by the largest ℓ1 norm in
  the data, which is not private.) A uniform subsample of ``--kdd-n`` rows (100,000 as in the
  paper) is drawn with a public seed.

* ``twitter-standin`` (ridge, CovNR): **a stand-in** for the paper's Twitter buzz set (not
  available offline) of its size and shape, n = 100,000, p = 77, generated from a public seed by
  :func:`twitter_standin`: 11 activity types x 7 days of Poisson counts driven by a log-normal
  per-post activity, label log(1 + buzz) as in their App. B.1; x and y are then divided by their
  largest ℓ1 norm / absolute value as in the paper (synthetic data: nothing private is read).
* ``kdd-paper``: KDD-99 under the paper's normalisation (App. B.1): the 3 text columns dropped,
  log(1 + x) on the first three attributes (duration, src_bytes, dst_bytes), every other column
  raw, then every row divided by M = max_i ||x_i||_1 over the subsample: **not private: as in
  the paper**. Same subsample and labels as ``kdd``.
* ``warfarin-paper``: warfarin with the paper's normalisation (x divided by the largest ℓ1 norm of
  the data, y by its largest |y|): **not private: as in the paper** (their App. B.1).

The IAT cost ε_0 = 16Δ log(2T/γ)/α with Δ = (√(1/λ) + 1)²/n (Claim A.5) depends on n, λ, T, γ
and α only, not on the data: every noise-reduction outcome pays it. At n = 100,000 it is 7.27 at
α = 0.05 and 4.84 at α = 0.075 (e^ε_0 = 1430 and 127); the paper quotes e^ε ≈ 10.0 and 4.65 for
noise reduction there (Sec. 4), which is ε_0 computed with log(2/γ) (no union bound over the T
levels: 2.198 and 1.465) plus a level ε_t of about 0.1. At n = 3564 ε_0 is 204 at
α = 0.05. The ratio ε_0 / theory ε is independent of n and α; it is 1.82 for p = 17 (warfarin)
and 0.41 for p = 77, so noise reduction can fall below the theory curve only for the larger p.

Parameters follow their App. B.1: λ = 0.005, γ = 0.1, noise-reduction levels geometric from
ε_1 = 1/n to ε_T = 4·E(α) (E = the theory ε; their text swaps ε_1 and ε_T), T = 1000; doubling
from 1/n until 4·E(α) is passed.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from pate_stab.data.tabular import load_warfarin_iwpc
from pate_stab.erm.accuracy_first import (
    AccuracyFirstResult,
    cov_nr,
    doubling_levels,
    doubling_method,
    geometric_levels,
    output_nr,
    theory_epsilon,
    theory_method,
)
from pate_stab.erm.accuracy_problems import LogisticProblem, RidgeProblem
from pate_stab.rng import seeded_generator

DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
_F64 = torch.float64
DATASETS = ("warfarin", "warfarin-paper", "twitter-standin", "kdd", "kdd-paper")

# Column index (in the 41-feature record) -> cap for log(1 + x)/log(1 + cap); rates are absent.
_KDD_TEXT = (1, 2, 3)
_KDD_CAPS = {
    0: 1e5,
    4: 1e9,
    5: 1e9,
    6: 1,
    7: 3,
    8: 3,
    9: 100,
    10: 5,
    11: 1,
    12: 1000,
    13: 1,
    14: 2,
    15: 1000,
    16: 100,
    17: 10,
    18: 10,
    19: 10,
    20: 1,
    21: 1,
    22: 511,
    23: 511,
    31: 255,
    32: 255,
}


def _read_kdd(root: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """KDD-99 10% as read: the 38 numeric columns (text columns dropped) and y ∈ {−1, 1} (normal → −1)."""
    rows, labels = [], []
    with gzip.open(Path(root) / "kddcup99" / "kddcup.data_10_percent.gz", "rt") as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) != 42:
                continue
            rows.append([float(v) for i, v in enumerate(parts[:41]) if i not in _KDD_TEXT])
            labels.append(-1.0 if parts[41] == "normal." else 1.0)
    x = torch.tensor(rows, dtype=_F64)
    y = torch.tensor(labels, dtype=_F64)
    return x, y


def _subsample(x: torch.Tensor, y: torch.Tensor, *, num_rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``num_rows`` of a public-seed permutation (all rows when there are fewer)."""
    if num_rows < x.shape[0]:
        idx = torch.randperm(x.shape[0], generator=seeded_generator(seed))[:num_rows]
        x, y = x[idx], y[idx]
    return x, y


def load_kdd(root: Path, *, num_rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """KDD-99 10% as (x with ||x||_1 <= 1, y ∈ {−1, 1}); see the module docstring."""
    x, y = _read_kdd(root)
    kept = [i for i in range(41) if i not in _KDD_TEXT]
    for j, col in enumerate(kept):
        if col in _KDD_CAPS:
            x[:, j] = torch.clamp(torch.log1p(x[:, j].clamp_min(0.0)) / math.log1p(_KDD_CAPS[col]), max=1.0)
        else:
            x[:, j] = x[:, j].clamp(0.0, 1.0)
    x = x / x.shape[1]
    x, y = _subsample(x, y, num_rows=num_rows, seed=seed)
    return x, y


def load_kdd_paper(root: Path, *, num_rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """KDD-99 normalised as in Ligett et al. App. B.1 -- not private: as in the paper.

    Text columns dropped, x ↦ log(1 + x) on duration, src_bytes and dst_bytes, the other 35
    columns raw, the same public-seed subsample as :func:`load_kdd`, then x ↦ x / max_i ||x_i||_1.
    """
    x, y = _read_kdd(root)
    x[:, :3] = torch.log1p(x[:, :3].clamp_min(0.0))  # kept columns 0, 1, 2 = records' 0, 4, 5
    x, y = _subsample(x, y, num_rows=num_rows, seed=seed)
    return x / x.abs().sum(dim=1).max(), y


def load_warfarin_l1(root: Path) -> tuple[torch.Tensor, torch.Tensor]:
    data = load_warfarin_iwpc(Path(root) / "warfarin")
    return data["x"] / 3.0, data["y"]


def twitter_standin(*, num_rows: int = 100_000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A synthetic ridge set of the Twitter buzz set's size and shape (see the module docstring).

    Each post has a log-normal activity a; each of 11 activity types k has a log-normal weight
    c_k (fixed by the seed) and a per-post factor; the 77 features are Poisson counts
    a · c_k · u_{post,k} · v_{day} for 7 days; buzz is Poisson(a · 5) and y = log(1 + buzz).
    Rows are divided by the largest ℓ1 norm and y by its largest value (their App. B.1).
    """
    g = seeded_generator(seed)
    a = torch.exp(torch.randn(num_rows, 1, generator=g, dtype=_F64) * 1.2 + 1.0)  # (n, 1)
    c = torch.exp(torch.randn(1, 11, 1, generator=g, dtype=_F64) * 0.7)  # (1, 11, 1)
    u = torch.exp(torch.randn(num_rows, 11, 1, generator=g, dtype=_F64) * 0.5)  # (n, 11, 1)
    v = torch.exp(torch.randn(num_rows, 1, 7, generator=g, dtype=_F64) * 0.3)  # (n, 1, 7)
    rates = a.unsqueeze(2) * c * u * v  # (n, 11, 7)
    x = torch.poisson(rates, generator=g).reshape(num_rows, 77)
    y = torch.log1p(torch.poisson(a.squeeze(1) * 5.0, generator=g))
    return x / x.abs().sum(dim=1).max(), y / y.abs().max()


def load_warfarin_paper(root: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Warfarin normalised as in Ligett et al. App. B.1 -- not private: as in the paper."""
    data = load_warfarin_iwpc(Path(root) / "warfarin")
    x, y = data["x"], data["y"]
    return x / x.abs().sum(dim=1).max(), y / y.abs().max()


def make_problem(dataset: str, *, data_root: Path, lam: float, kdd_n: int) -> RidgeProblem | LogisticProblem:
    if dataset == "warfarin":
        return RidgeProblem(*load_warfarin_l1(data_root), lam=lam)
    if dataset == "warfarin-paper":
        return RidgeProblem(*load_warfarin_paper(data_root), lam=lam)
    if dataset == "twitter-standin":
        return RidgeProblem(*twitter_standin(), lam=lam)
    if dataset == "kdd":
        return LogisticProblem(*load_kdd(data_root, num_rows=kdd_n), lam=lam)
    if dataset == "kdd-paper":
        return LogisticProblem(*load_kdd_paper(data_root, num_rows=kdd_n), lam=lam)
    raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")


def run_method(
    problem: RidgeProblem | LogisticProblem,
    method: str,
    *,
    alpha: float,
    gamma: float,
    num_levels: int,
    generator: torch.Generator,
    union_bound: bool = True,
) -> AccuracyFirstResult:
    top = 4.0 * theory_epsilon(problem, alpha=alpha)
    bottom = min(1.0 / problem.n, top / 2.0)
    if method == "noise_reduction":
        algo = cov_nr if isinstance(problem, RidgeProblem) else output_nr
        return algo(
            problem,  # type: ignore[arg-type]
            alpha=alpha,
            epsilons=geometric_levels(bottom, top, num_levels),
            gamma=gamma,
            generator=generator,
            union_bound=union_bound,
        )
    if method == "doubling":
        return doubling_method(
            problem,
            alpha=alpha,
            epsilons=doubling_levels(bottom, top),
            gamma=gamma,
            generator=generator,
            union_bound=union_bound,
        )
    if method == "theory":
        return theory_method(problem, alpha=alpha, generator=generator)
    raise ValueError(f"method must be noise_reduction, doubling or theory, got {method!r}")


def run_accuracy_first(
    dataset: str,
    alpha: float,
    *,
    method: str = "noise_reduction",
    gamma: float = 0.1,
    lam: float = 0.005,
    num_levels: int = 1000,
    seed: int = 0,
    data_root: Path = DEFAULT_DATA,
    kdd_n: int = 100_000,
    problem: RidgeProblem | LogisticProblem | None = None,
    union_bound: bool = True,
) -> dict[str, Any]:
    """Run one accuracy-first method on ``dataset`` for target ``alpha``; report the outcome.

    Returns:
        dict with the chosen level (index t, ε_t), the ex-post ε (and its split into testing and
        hypotheses), e^ε, and the achieved excess risk L(θ) − L(θ*) (computed on the private
        data for evaluation; not itself a private release).
    """
    problem = problem or make_problem(dataset, data_root=data_root, lam=lam, kdd_n=kdd_n)
    res = run_method(
        problem,
        method,
        alpha=alpha,
        gamma=gamma,
        num_levels=num_levels,
        generator=seeded_generator(seed),
        union_bound=union_bound,
    )
    excess = float(problem.excess_risk(res.theta)) if res.theta is not None else float("nan")
    return {
        "dataset": dataset,
        "method": method,
        "alpha": alpha,
        "gamma": gamma,
        "lam": problem.lam,
        "n": problem.n,
        "p": problem.p,
        "seed": seed,
        "union_bound": union_bound,
        "index": res.index,
        "epsilon_level": res.epsilon_hypotheses,
        "epsilon_test": res.epsilon_test,
        "epsilon_ex_post": res.epsilon_ex_post,
        "risk_factor": math.exp(res.epsilon_ex_post) if res.epsilon_ex_post < 700 else math.inf,
        "excess_risk": excess,
        "num_tested": res.num_tested,
    }


def figure(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out) / args.run
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    t0 = time.time()
    for dataset in args.datasets:
        problem = make_problem(dataset, data_root=Path(args.data_root), lam=args.lam, kdd_n=args.kdd_n)
        for alpha in args.alphas:
            for method in ("noise_reduction", "doubling", "theory"):
                for trial in range(args.trials):
                    rows.append(
                        run_accuracy_first(
                            dataset,
                            alpha,
                            method=method,
                            gamma=args.gamma,
                            num_levels=args.levels,
                            seed=trial,
                            problem=problem,
                            union_bound=args.union_bound == "on",
                        )
                    )
        print(f"{dataset}: done at {time.time() - t0:.1f}s", flush=True)
    with open(out / "accuracy_first.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = summarise(rows)
    report = {"config": vars(args), "seconds": time.time() - t0, "summary": summary}
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    plot(summary, out / "fig1.png")
    return report


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["method"], r["alpha"]), []).append(r)
    out = []
    for (dataset, method, alpha), rs in sorted(groups.items()):
        finite = [r["epsilon_ex_post"] for r in rs if math.isfinite(r["epsilon_ex_post"])]
        mean_eps = sum(finite) / len(finite) if finite else math.inf
        excess = [r["excess_risk"] for r in rs if math.isfinite(r["excess_risk"])]
        out.append(
            {
                "dataset": dataset,
                "method": method,
                "alpha": alpha,
                "union_bound": rs[0]["union_bound"],
                "trials": len(rs),
                "exhausted": len(rs) - len(finite),
                "mean_epsilon": mean_eps,
                "risk_factor_of_mean": math.exp(mean_eps) if mean_eps < 700 else math.inf,
                "mean_epsilon_test": sum(r["epsilon_test"] for r in rs) / len(rs),
                "mean_epsilon_hypotheses": sum(r["epsilon_level"] for r in rs) / len(rs),
                "mean_excess_risk": sum(excess) / max(len(excess), 1),
                "max_excess_risk": max(excess, default=float("nan")),
                "frac_excess_above_alpha": sum(e > alpha for e in excess) / max(len(excess), 1),
            }
        )
    return out


def plot(summary: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({s["dataset"] for s in summary})
    fig, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4), squeeze=False)
    titles = {
        "warfarin": "Ridge (CovNR), warfarin",
        "kdd": "Logistic (OutputNR), KDD-99, public caps",
        "kdd-paper": "Logistic (OutputNR), KDD-99, paper's normalisation (not private)",
        "warfarin-paper": "Ridge (CovNR), warfarin, paper's scaling (not private)",
        "twitter-standin": "Ridge (CovNR), Twitter: SYNTHETIC STAND-IN n=1e5, p=77",
    }
    for ax, dataset in zip(axes[0], datasets, strict=True):
        for method, style in (("noise_reduction", "o-"), ("doubling", "s--"), ("theory", "^:")):
            pts = [s for s in summary if s["dataset"] == dataset and s["method"] == method]
            ax.plot([s["alpha"] for s in pts], [s["mean_epsilon"] for s in pts], style, label=method)
        ax.set_yscale("log")
        ax.set_xlabel("accuracy target α (excess empirical risk)")
        ax.set_ylabel("average ex-post privacy loss ε")
        unions = {s.get("union_bound", True) for s in summary if s["dataset"] == dataset}
        suffix = "" if unions == {True} else "\nunion bound over T dropped for NR and Doubling (post hoc)"
        ax.set_title(titles.get(dataset, dataset) + suffix, fontsize=9)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "figure"):
        p = sub.add_parser(name)
        p.add_argument("--data-root", default=str(DEFAULT_DATA))
        p.add_argument("--lam", type=float, default=0.005)
        p.add_argument("--gamma", type=float, default=0.1)
        p.add_argument("--levels", type=int, default=1000)
        p.add_argument("--kdd-n", type=int, default=100_000)
        p.add_argument(
            "--union-bound",
            choices=["on", "off"],
            default="on",
            help="on: both searches union-bound γ over their T tests (Thm A.1/A.2); off: neither does",
        )
    run_p = sub.choices["run"]
    run_p.add_argument("--dataset", choices=list(DATASETS), required=True)
    run_p.add_argument("--alpha", type=float, required=True)
    run_p.add_argument("--method", choices=["noise_reduction", "doubling", "theory"], default="noise_reduction")
    run_p.add_argument("--seed", type=int, default=0)
    fig_p = sub.choices["figure"]
    fig_p.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=["warfarin", "kdd"])
    fig_p.add_argument("--alphas", nargs="+", type=float, default=[0.025, 0.05, 0.1, 0.2])
    fig_p.add_argument("--trials", type=int, default=20)
    fig_p.add_argument("--out", default="checkpoints")
    fig_p.add_argument("--run", default="accuracy_first")
    args = parser.parse_args(argv)
    if args.command == "run":
        print(
            json.dumps(
                run_accuracy_first(
                    args.dataset,
                    args.alpha,
                    method=args.method,
                    gamma=args.gamma,
                    lam=args.lam,
                    num_levels=args.levels,
                    seed=args.seed,
                    data_root=Path(args.data_root),
                    kdd_n=args.kdd_n,
                    union_bound=args.union_bound == "on",
                ),
                indent=2,
            )
        )
    else:
        report = figure(args)
        for s in report["summary"]:
            print(
                f"{s['dataset']:9s} {s['method']:16s} α={s['alpha']:<6} ε̄={s['mean_epsilon']:9.3f} "
                f"(test {s['mean_epsilon_test']:8.3f}, hyp {s['mean_epsilon_hypotheses']:8.3f}) "
                f"⊥={s['exhausted']} excess mean {s['mean_excess_risk']:.4f} max {s['max_excess_risk']:.4f}"
            )
        print(f"total {report['seconds']:.1f}s")


if __name__ == "__main__":
    main()

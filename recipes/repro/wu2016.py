"""Wu et al. 2016, Fig. 1-2 (warfarin): the paper's protocol beside the private one, with the
decomposition that explains the gap between them and the paper's text.

Protocols (``--protocols``):

* ``private`` -- the protocol of ``--inversion``: :func:`load_warfarin_iwpc` with public
  ranges, rows divided by 3 (||x|| <= 1 without reading the data), y = min(dose, 140)/70 - 1.
* ``private-centered`` -- the private protocol with the dose centred at a public constant,
  y = (min(dose, 140) - 35) / 105 in [-1/3, 1]: 35 mg/week is the usual 5 mg/day starting dose,
  clinical guidance rather than a statistic of these records.
* ``paper`` -- **not private: as in the paper** ("we assume that the training data is scaled so
  that they lie in the unit ball", Sec. 4.2): age, height and weight min-max scaled with the
  ranges of the data, every row divided by the largest row norm of the data, the dose min-max
  scaled to [-1, 1] with its own range (PrivacyLeakWarning).
* ``paper-centered`` -- the same, but the dose centred at its mean and divided by its largest
  deviation from it (not private either). The paper does not say this; it tests its remark that
  "the coefficients of the linear regression model are all small when trained over the scaled
  data" (Sec. 4.2), which fails for both protocols above (the intercept alone needs |w_0| > 1).

Methods at each epsilon (rls-out, Wu et al. Alg 4, printed noise constant 12R + 8):

* ``NonPrivate``: least squares (lam = 1e-6, unconstrained).
* ``DataIndependent``: R = 1, lam = sqrt(d / (n eps)) (Sec. 4.2).
* ``DI-noiseless``: the same ridge fit on ||w|| <= 1 without noise (diagnostic: the error that
  R = 1 and lam cause by themselves).
* ``Oracle``: R in {.25, .5, 1, 2} x lam in 10 values on [0.001, 0.5] (Sec. 4.2), the pair with
  the best mean test MSE over the repeats (not private: the best output perturbation can do).
* ``Tuned-R1``: Alg 5 with R in {.25, .5, 1}, lam = 0.002 * 2^j (j = 0..7), 25 chunks, utility
  sensitivity as printed (Delta u = max R^2 = 1 for the *mean* validation loss).
* ``Tuned-R1-exact``: the same with the sensitivity of the mean validation loss,
  (max ||w_i|| + 1)^2 / |S'| (the package default), each chunk model projected onto ||w|| <= R.
* ``DI-expnorm``: **a hypothesis, not differentially private**: DataIndependent with the noise
  norm drawn as Exp(s) instead of Gamma(d, s) (density ∝ exp(-||k||/s) in R^d has a Gamma(d, s)
  norm). It tests whether an implementation that samples the norm of the l2-Laplace vector as a
  one-dimensional Laplace/exponential variable would produce the paper's curves.
* ``Tuned-R1-expnorm``: the same hypothesis for Tuned-R1 (chunk models with an Exp(s) noise norm,
  utility sensitivity as printed). Not differentially private.
* ``Oracle-expnorm``: the same hypothesis for Oracle (every grid point's noise norm Exp(s), the
  best grid point per epsilon). Not differentially private; post hoc.
* ``FM``: the Functional Mechanism (Zhang et al. 2012, :func:`pate_stab.erm.functional_mechanism`),
  Delta = 2(1 + d)^2 as Zhang et al. print it, spectral trimming, no extra regularisation. Its
  noise is i.i.d. Laplace on each coefficient (no norm is drawn), so the Exp-norm hypothesis does
  not apply to it.
* ``Tuned-R2``: Alg 5 with R2 = {.5, 1, 2} (:func:`pate_stab.erm.wu_tuned_output_perturbation`,
  printed utility sensitivity R^2 = 4, i.e. exp(-L eps / 8) as Sec. 4.2 prints; chunk models
  projected onto their ball, which that bound needs). ``Tuned-R2-exact``: the exact sensitivity.
  ``Tuned-R2-expnorm``: Exp-norm chunk models, printed sensitivity (not DP; post hoc).

The methods added with the Functional Mechanism (FM, Oracle-expnorm, Tuned-R2*) draw from their own
generator (seed + 1000), so the methods recorded before them reproduce exactly.

Fig. 7 (``--fig7-repeats``, ``private`` protocol): Tuned (R1, eps_p = 0.5) with each of the 24
training chunks subsampled at rate r = 10 %, 20 %, ..., 100 % (the paper's protocol: 25 chunks,
24 for training, the last for validation, 100 repeats). Deviation: the paper permutes the whole
data set into the 25 chunks and does not say where the MSE is measured; here each repeat holds
out a random 20 % test split, Tuned runs on the other 80 %, and the MSE is on the test split.
Both the printed utility sensitivity (R^2 = 1) and the exact one are recorded.

Splits: random 80/20 train/test splits (``--repeats``); the paper uses "the same training/validation
split as Fredrikson et al." without printing it, and the PharmGKB copy in ../shared/data carries no
cohort column to rebuild it from (docs/results/repro/README.md), so that split is unknowable.
MSE is on the scaled dose of each protocol
(``private``: y = dose/70 - 1, multiply by 70^2 = 4900 for (mg/week)^2; ``paper``: y in [-1, 1]
over the data's dose range, multiply by (range/2)^2). The paper does not say in which unit its
MSE axis is (Sec. 5.3 quotes MSE 1.82 for Oracle at eps = 0.2, which is larger than the variance
of a dose scaled to [-1, 1]).

    python recipes/repro/wu2016.py --repeats 20 --out checkpoints/repro_wu2016

takes about 4 minutes on one thread (20 repeats, four protocols).

``--inversion`` runs Wu et al.'s Sec. 5 instead, on the private protocol
(:func:`pate_stab.repro.wu2016_inversion.run_inversion`): MSE of non-private regression,
data-independent, privately tuned (Alg 5) and oracle rls-out and objective perturbation, and the
model-inversion (VKORC1) accuracy of each, at six epsilons; ``--constant tight`` uses the tight
rls-out noise constant instead of the printed 12R + 8:

    python recipes/repro/wu2016.py --inversion --repeats 5 --out checkpoints/wu2016_inversion
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import torch

from pate_stab.data.bounds import bounds_from_data, scale_to_bounds
from pate_stab.data.tabular import load_warfarin_iwpc
from pate_stab.erm import functional_mechanism, rls_out, solve_erm, wu_private_tuning, wu_tuned_output_perturbation
from pate_stab.erm.wu_tuned import wu_tuned_grid
from pate_stab.privacy.noise.seeded import exponential, l2_laplace_vector
from pate_stab.repro.wu2016_inversion import run_inversion
from pate_stab.rng import seeded_generator

EPSILONS = [0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0]
METHODS = [
    "NonPrivate",
    "DataIndependent",
    "DI-noiseless",
    "Oracle",
    "Tuned-R1",
    "Tuned-R1-exact",
    "DI-expnorm",
    "Tuned-R1-expnorm",
    "Oracle-expnorm",
    "FM",
    "Tuned-R2",
    "Tuned-R2-exact",
    "Tuned-R2-expnorm",
]
POST_HOC = ("DI-expnorm", "Tuned-R1-expnorm", "Oracle-expnorm", "Tuned-R2-expnorm")
FIG7_RATES = [round(0.1 * k, 1) for k in range(1, 11)]
FIG7_EPSILON = 0.5
ORACLE_GRID = [(r, lam) for r in (0.25, 0.5, 1.0, 2.0) for lam in torch.linspace(0.001, 0.5, 10).tolist()]
PROTOCOLS = ("paper", "paper-centered", "private", "private-centered")
PUBLIC_DOSE_CENTER = 35.0  # mg/week: the 5 mg/day starting dose of dosing guidelines (public)
TUNED_GRID = [(r, 0.002 * 2**j) for r in (0.25, 0.5, 1.0) for j in range(8)]


def expnorm_noise(scale: float, dim: int, *, generator: torch.Generator) -> torch.Tensor:
    """Uniform direction times an Exp(scale) norm: the hypothesised (not DP) sampler."""
    direction = torch.randn(dim, generator=generator, dtype=torch.float64)
    return direction / torch.linalg.vector_norm(direction) * exponential(scale, generator=generator)


def load(protocol: str, data_dir: Path) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(x, y, factor to (mg/week)^2) for a protocol; see the module docstring."""
    data = load_warfarin_iwpc(data_dir)
    x, dose = data["x"], data["dose"]
    if protocol == "private":
        return x, data["y"], 70.0**2
    if protocol == "private-centered":
        return x, (dose.clamp(max=140.0) - PUBLIC_DOSE_CENTER) / (140.0 - PUBLIC_DOSE_CENTER), 105.0**2
    if protocol not in ("paper", "paper-centered"):
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    # Not private: as in the paper (ranges and the largest row norm read from the data).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = x * 3.0  # undo the public /3: indicators in {0, 1}, age/height/weight in [0, 1]
        raw[:, 1:4] = scale_to_bounds(raw[:, 1:4], bounds=bounds_from_data(raw[:, 1:4]))
        xp = raw / float(torch.linalg.vector_norm(raw, dim=1).max())
        ((lo, hi),) = bounds_from_data(dose.unsqueeze(1))
    if protocol == "paper-centered":
        spread = float((dose - dose.mean()).abs().max())
        return xp, (dose - dose.mean()) / spread, spread**2
    y = 2.0 * (dose - lo) / (hi - lo) - 1.0
    return xp, y, ((hi - lo) / 2.0) ** 2


def run(protocol: str, args: argparse.Namespace) -> dict[str, object]:
    x, y, to_mg2 = load(protocol, Path(args.data) / "warfarin")
    n_all, d = x.shape
    gen = seeded_generator(args.seed)
    gen2 = seeded_generator(args.seed + 1000)  # the methods added later (module docstring)
    mse: dict[str, dict[float, list[float]]] = {m: {e: [] for e in EPSILONS} for m in METHODS}
    oracle: dict[tuple[float, float], dict[float, list[float]]] = {p: {e: [] for e in EPSILONS} for p in ORACLE_GRID}
    oracle_exp: dict[tuple[float, float], dict[float, list[float]]] = {
        p: {e: [] for e in EPSILONS} for p in ORACLE_GRID
    }
    norms: list[float] = []
    for _ in range(args.repeats):
        perm = torch.randperm(n_all, generator=gen)
        ntr = int(0.8 * n_all)
        xt, yt, xw, yw = x[perm[:ntr]], y[perm[:ntr]], x[perm[ntr:]], y[perm[ntr:]]

        def test_mse(w: torch.Tensor, xw: torch.Tensor = xw, yw: torch.Tensor = yw) -> float:
            return float(((xw @ w - yw) ** 2).mean())

        w_np = solve_erm(xt, yt, loss="squared", lam=1e-6, tol=1e-9).weights
        # rls-out's noise-free part depends on (R, lam) only: one solve per grid point, noise per eps.
        fits = {p: solve_erm(xt, yt, loss="squared", lam=p[1], radius=p[0], tol=1e-9).weights for p in ORACLE_GRID}

        def projected(
            r: float, lam: float, xs: torch.Tensor, ys: torch.Tensor, eps: float, g: torch.Generator
        ) -> torch.Tensor:
            w = rls_out(xs, ys, epsilon=eps, lam=lam, radius=r, generator=g, constant="paper").weights
            return w * min(1.0, r / float(torch.linalg.vector_norm(w)))

        def plain(
            r: float, lam: float, xs: torch.Tensor, ys: torch.Tensor, eps: float, g: torch.Generator
        ) -> torch.Tensor:
            return rls_out(xs, ys, epsilon=eps, lam=lam, radius=r, generator=g, constant="paper").weights

        def expnorm(
            r: float, lam: float, xs: torch.Tensor, ys: torch.Tensor, eps: float, g: torch.Generator
        ) -> torch.Tensor:
            wbar = solve_erm(xs, ys, loss="squared", lam=lam, radius=r, tol=1e-9).weights
            return wbar + expnorm_noise((12.0 * r + 8.0) / (lam * xs.shape[0] * eps), xs.shape[1], generator=g)

        norms.append(float(torch.linalg.vector_norm(w_np)))
        for eps in EPSILONS:
            mse["NonPrivate"][eps].append(test_mse(w_np))
            lam_di = math.sqrt(d / (ntr * eps))
            mse["DataIndependent"][eps].append(
                test_mse(rls_out(xt, yt, epsilon=eps, lam=lam_di, radius=1.0, generator=gen, constant="paper").weights)
            )
            w_di = solve_erm(xt, yt, loss="squared", lam=lam_di, radius=1.0, tol=1e-9).weights
            mse["DI-noiseless"][eps].append(test_mse(w_di))
            scale = (12.0 * 1.0 + 8.0) / (lam_di * ntr * eps)
            mse["DI-expnorm"][eps].append(test_mse(w_di + expnorm_noise(scale, d, generator=gen)))
            if not args.skip_tuned_r1:
                _, w = wu_private_tuning(
                    TUNED_GRID, expnorm, xt, yt, epsilon=eps, generator=gen, utility_sensitivity=1.0
                )
                mse["Tuned-R1-expnorm"][eps].append(test_mse(w))
                _, w = wu_private_tuning(TUNED_GRID, plain, xt, yt, epsilon=eps, generator=gen, utility_sensitivity=1.0)
                mse["Tuned-R1"][eps].append(test_mse(w))
                _, w = wu_private_tuning(TUNED_GRID, projected, xt, yt, epsilon=eps, generator=gen)
                mse["Tuned-R1-exact"][eps].append(test_mse(w))
            for (r, lam), wbar in fits.items():
                s = (12.0 * r + 8.0) / (lam * ntr * eps)
                oracle[(r, lam)][eps].append(test_mse(wbar + l2_laplace_vector(s, d, generator=gen)))
            # Methods added later, on their own generator.
            for (r, lam), wbar in fits.items():
                s = (12.0 * r + 8.0) / (lam * ntr * eps)
                oracle_exp[(r, lam)][eps].append(test_mse(wbar + expnorm_noise(s, d, generator=gen2)))
            mse["FM"][eps].append(test_mse(functional_mechanism(xt, yt, epsilon=eps, generator=gen2).weights))
            _, w = wu_tuned_output_perturbation(xt, yt, epsilon=eps, generator=gen2, radii="R2", utility="printed")
            mse["Tuned-R2"][eps].append(test_mse(w))
            _, w = wu_tuned_output_perturbation(xt, yt, epsilon=eps, generator=gen2, radii="R2", utility="exact")
            mse["Tuned-R2-exact"][eps].append(test_mse(w))
            _, w = wu_private_tuning(
                wu_tuned_grid("R2"), expnorm, xt, yt, epsilon=eps, generator=gen2, utility_sensitivity=4.0
            )
            mse["Tuned-R2-expnorm"][eps].append(test_mse(w))
    best_params = {}
    best_params_exp = {}
    for eps in EPSILONS:
        best = min(ORACLE_GRID, key=lambda p, e=eps: sum(oracle[p][e]) / len(oracle[p][e]))
        mse["Oracle"][eps] = oracle[best][eps]
        best_params[eps] = best
        best = min(ORACLE_GRID, key=lambda p, e=eps: sum(oracle_exp[p][e]) / len(oracle_exp[p][e]))
        mse["Oracle-expnorm"][eps] = oracle_exp[best][eps]
        best_params_exp[eps] = best
    summary = {}
    for m in [m for m in METHODS if mse[m][EPSILONS[0]]]:
        for eps in EPSILONS:
            v = torch.tensor(mse[m][eps])
            summary[f"{m}/{eps}"] = {
                "mean": float(v.mean()),
                "std": float(v.std()) if v.numel() > 1 else 0.0,
                "se": float(v.std() / math.sqrt(v.numel())) if v.numel() > 1 else 0.0,
                "median": float(v.median()),
            }
    var_y = float(y.var())
    return {
        "n": n_all,
        "d": d,
        "to_mg2_per_week2": to_mg2,
        "to_mg2_per_day2": to_mg2 / 49.0,
        "var_y": var_y,
        "mean_row_norm_sq": float((x * x).sum(1).mean()),
        "mean_nonprivate_norm": sum(norms) / len(norms),
        "oracle_params": {str(e): list(p) for e, p in best_params.items()},
        "oracle_expnorm_params": {str(e): list(p) for e, p in best_params_exp.items()},
        "summary": summary,
    }


def fig7(protocol: str, args: argparse.Namespace) -> dict[str, object]:
    """Fig. 7: Tuned (R1, eps_p = 0.5) with every training chunk subsampled at rate r (module docstring)."""
    x, y, to_mg2 = load(protocol, Path(args.data) / "warfarin")
    n_all = x.shape[0]
    gen = seeded_generator(args.seed + 2000)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for utility in ("printed", "exact"):
        rows: dict[str, dict[str, float]] = {}
        for rate in args.fig7_rates:
            vals = []
            for _ in range(args.fig7_repeats):
                perm = torch.randperm(n_all, generator=gen)
                ntr = int(0.8 * n_all)
                xt, yt, xw, yw = x[perm[:ntr]], y[perm[:ntr]], x[perm[ntr:]], y[perm[ntr:]]
                _, w = wu_tuned_output_perturbation(
                    xt, yt, epsilon=FIG7_EPSILON, generator=gen, radii="R1", utility=utility, chunk_rate=rate
                )
                vals.append(float(((xw @ w - yw) ** 2).mean()))
            v = torch.tensor(vals)
            rows[str(rate)] = {
                "mean": float(v.mean()),
                "se": float(v.std() / math.sqrt(v.numel())),
                "median": float(v.median()),
                "chunk_size": math.ceil(rate * (int(0.8 * n_all) // 25)),
            }
        out[utility] = rows
    return {"protocol": protocol, "epsilon": FIG7_EPSILON, "repeats": args.fig7_repeats, "to_mg2_per_week2": to_mg2,
            "to_mg2_per_day2": to_mg2 / 49.0, "rates": list(args.fig7_rates), "summary": out}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2].parent / "shared" / "data"))
    ap.add_argument("--repeats", type=int, default=None, help="random 80/20 splits (default 20; --inversion: 5)")
    ap.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--inversion", action="store_true", help="Sec. 5 with model inversion (private protocol)")
    ap.add_argument("--constant", default="paper", choices=["paper", "tight"], help="--inversion: rls-out's constant")
    ap.add_argument("--out", default=None, help="default checkpoints/repro_wu2016 (--inversion: .../wu2016_inversion)")
    ap.add_argument(
        "--skip-tuned-r1",
        action="store_true",
        help="skip the Tuned-R1 variants (the costliest; the splits then differ from a full run's)",
    )
    ap.add_argument("--fig7-rates", nargs="+", type=float, default=FIG7_RATES)
    ap.add_argument("--fig7-repeats", type=int, default=0, help="Fig. 7 repeats per rate (paper: 100; 0 skips it)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.inversion:
        summary = run_inversion(
            Path(args.data) / "warfarin",
            Path(args.out or "checkpoints/wu2016_inversion"),
            repeats=5 if args.repeats is None else args.repeats,
            constant=args.constant,
            seed=args.seed,
        )
        print(json.dumps(summary, indent=1))
        return
    if args.repeats is None:
        args.repeats = 20
    if args.out is None:
        args.out = "checkpoints/repro_wu2016"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    results = {}
    for protocol in args.protocols:
        results[protocol] = run(protocol, args)
        print(f"{protocol}: {time.time() - t0:.0f}s", flush=True)
    fig7_report = fig7("private", args) if args.fig7_repeats > 0 else None
    if fig7_report is not None:
        print(f"fig7: {time.time() - t0:.0f}s", flush=True)
    report = {
        "config": vars(args),
        "seconds": time.time() - t0,
        "epsilons": EPSILONS,
        "results": results,
        "fig7": fig7_report,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1))
    lines = [
        f"Wu et al. 2016 Fig. 1-2 reproduction, {args.repeats} random 80/20 splits, mean ± sd test MSE "
        "on the protocol's scaled dose"
    ]
    for protocol, res in results.items():
        lines.append(
            f"\nprotocol {protocol}: n = {res['n']}, d = {res['d']}, Var(y) = {res['var_y']:.4f}, "
            f"mean ||x||^2 = {res['mean_row_norm_sq']:.3f}, "
            f"||w_nonprivate|| = {res['mean_nonprivate_norm']:.2f}"
        )
        lines.append("method".ljust(18) + "".join(f"eps={e:<12}" for e in EPSILONS))
        for m in [m for m in METHODS if f"{m}/{EPSILONS[0]}" in res["summary"]]:
            stats = [res["summary"][f"{m}/{e}"] for e in EPSILONS]
            lines.append(m.ljust(18) + "".join(f"{c['mean']:.3f}±{c['std']:.3f}".ljust(16) for c in stats))
    if fig7_report is not None:
        lines.append(
            f"\nFig. 7 (private protocol, Tuned R1, eps_p = {FIG7_EPSILON}, {args.fig7_repeats} repeats): "
            "mean ± s.e. test MSE by chunk rate r"
        )
        f7 = fig7_report["summary"]
        assert isinstance(f7, dict)
        for utility, rows in f7.items():
            lines.append(
                f"utility {utility:8s}"
                + "".join(f"r={r}: {rows[str(r)]['mean']:.3f}±{rows[str(r)]['se']:.3f}  " for r in args.fig7_rates)
            )
    lines.append(f"\nwall time {time.time() - t0:.0f}s (one thread)")
    (out / "table.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.2), squeeze=False)
    for ax, (protocol, res) in zip(axes[0], results.items(), strict=True):
        for m in [m for m in METHODS if f"{m}/{EPSILONS[0]}" in res["summary"]]:
            means = [res["summary"][f"{m}/{e}"]["mean"] for e in EPSILONS]
            sds = [res["summary"][f"{m}/{e}"]["std"] for e in EPSILONS]
            ax.errorbar(
                EPSILONS,
                means,
                yerr=sds,
                marker="o",
                capsize=2,
                label=m,
                ls=":" if m == "DI-noiseless" or m in POST_HOC else "-",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("test MSE (scaled dose)")
        ax.set_title(f"protocol: {protocol}")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "wu_fig1_fig2.png", dpi=120)


if __name__ == "__main__":
    main()

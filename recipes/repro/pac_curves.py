"""PAC sample-complexity curves of private label release and label-private learning (BTT18 §4, §5).

Part ``hard`` (Thm 4.3, 4.4, 4.6, 4.7). For each concept class (thresholds V = 1, intervals V = 2,
halfspaces in R^d V = d + 1), setting (realizable; agnostic = random label noise η), private
sample size n and seed:

1. draw n private points and m public points, m = scale·(n/V)^{4/3} (realizable) or
   scale·(n/V)^{4/5} (agnostic), the query budget of Thm 4.3 / 4.4;
2. set T (Cor 4.1, teacher α from the paper's rate V/n′ or √(V/n′)) and k as the theorems
   prescribe — ``paper``: Alg 4 line 1 with the paper calibration; ``tight``: the tight
   calibration and the smallest k that answers 2/3-majority queries w.p. 1 − β/(2m) — by a
   fixed point in k (:func:`pate_stab.theory.pac.prescribed_num_teachers`). The releaser is
   *usable* at n when that fixed point has k ≤ n and T < m (Cor 4.1's bound T/m below 1);
3. partition by a keyed hash of the record id (one record moves one shard), train k ERM
   teachers at once (exact ERM for thresholds / intervals, batched logistic regression for
   halfspaces), release labels for the m public points with the hard-label releaser;
4. student = ERM on the privately labelled public points, ⊥ (and queries after halting) dropped
   (Alg 5; the paper's uniform-random replacement only adds label noise to the student);
5. measure, against the clean labels (disagreement with the target h*; for random label noise
   err − γ = (1 − 2η)·disagreement): h_priv's disagreement on the m queries with ⊥ counted as a
   uniform random label (expected ½ each), the number of ⊥, the student's and the non-private
   ERM's (on all n points) disagreement — exact for the 1-D classes, on 10⁵ fresh points for
   halfspaces.

Part ``soft`` (Thm 5.14, the example after Def 5.11): x uniform on ±[c, 3c], y = 1[x + z > 0],
z ~ N(0, c²/8); learner = one-pass SGD logistic regression (deterministic order: consistent
randomization). α of Def 5.7 is estimated from paired runs on D and D^{(j)} (same coins, j
uniform) as √(mean |h_D(x) − h_{D^{(j)}}(x)|²), maximised over the queries; the expected score
E_D[h_D(x)] is the mean of many independent learners. k from Thm 5.14, γ = 16α√(2n′) + ν
rounded up to 1/integer; reports the fraction of released scores within 8α√(2n′) + ν/2 of it.

Outputs under ``checkpoints/<run>/``: hard_runs.csv (every run), hard_summary.csv (mean/std over
seeds), slopes.csv, usability.csv, soft.csv, report.json and one PNG per class and setting.

    python recipes/repro/pac_curves.py                 # default sweep (a few minutes on 2 cores)
    python recipes/repro/pac_curves.py --smoke         # seconds
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.aggregation.soft_labels import SoftLabelReleaser
from pate_stab.data import make_halfspace, make_interval, make_threshold
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.repro.pac_plot import loglog_panel
from pate_stab.rng import seeded_generator, spawn_generators
from pate_stab.theory import soft_label_num_teachers
from pate_stab.theory.erm_classes import (
    halfspace_vote_counts,
    interval_erm,
    interval_vote_counts,
    logistic_erm,
    predict_halfspace,
    threshold_erm,
    threshold_vote_counts,
)
from pate_stab.theory.pac import (
    AGNOSTIC_ERROR_EXPONENT,
    REALIZABLE_ERROR_EXPONENT,
    balanced_num_queries,
    lattice_gamma,
    loglog_slope,
    on_average_stability,
    prescribed_num_teachers,
    soft_label_gamma,
    soft_label_radius,
    tight_calibration,
)

ROOT = Path(__file__).resolve().parents[2]
THRESHOLD, LOW, HIGH = 0.5, 0.25, 0.75  # targets of make_threshold / make_interval defaults


# ----------------------------------------------------------------------------- partition


def _copy(g: torch.Generator) -> torch.Generator:
    """A generator in the same state (the same seed's data for every mode and the baseline)."""
    c = torch.Generator()
    c.set_state(g.get_state())
    return c


def keyed_shards(num_records: int, num_teachers: int, *, generator: torch.Generator) -> torch.Tensor:
    """Shard of record i = splitmix64(i XOR key) mod k, key secret (64 bits from ``generator``).

    A function of the record's id alone (as :func:`pate_stab.teachers.partition_indices`, which
    hashes with BLAKE2b one record at a time), so adding or removing one record changes one shard;
    vectorized for 10⁷ records. Not a cryptographic hash: fine for simulation, not deployment.
    """
    key = np.uint64(int(torch.randint(0, 2**62, (1,), generator=generator)))
    z = np.arange(num_records, dtype=np.uint64) ^ key
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return torch.from_numpy((z % np.uint64(num_teachers)).astype(np.int64))


# ----------------------------------------------------------------------------- classes


class ConceptClass:
    """Data, ERM, votes and exact disagreement with the target for one class."""

    name = ""
    vc_dim = 1

    def sample(self, n: int, noise: float, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def clean(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def fit(self, x: torch.Tensor, y: torch.Tensor, shard: torch.Tensor | None, k: int):
        raise NotImplementedError

    def votes(self, model, xq: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def disagreement(self, model) -> torch.Tensor:
        """(k,) P_x[h_j(x) ≠ h*(x)]."""
        raise NotImplementedError


class Thresholds(ConceptClass):
    name, vc_dim = "threshold", 1

    def sample(self, n, noise, g):
        return make_threshold(n, threshold=THRESHOLD, noise_rate=noise, generator=g)

    def clean(self, x):
        return (x[:, 0] >= THRESHOLD).long()

    def fit(self, x, y, shard, k):
        return threshold_erm(x, y, shard, k)[0]

    def votes(self, model, xq):
        return threshold_vote_counts(model, xq[:, 0])

    def disagreement(self, model):
        return (model.clamp(0.0, 1.0) - THRESHOLD).abs()


class Intervals(ConceptClass):
    name, vc_dim = "interval", 2

    def sample(self, n, noise, g):
        return make_interval(n, low=LOW, high=HIGH, noise_rate=noise, generator=g)

    def clean(self, x):
        return ((x[:, 0] >= LOW) & (x[:, 0] <= HIGH)).long()

    def fit(self, x, y, shard, k):
        a, b, _ = interval_erm(x, y, shard, k)
        return a, b

    def votes(self, model, xq):
        return interval_vote_counts(model[0], model[1], xq[:, 0])

    def disagreement(self, model):
        a, b = model[0].clamp(0.0, 1.0), model[1].clamp(0.0, 1.0)
        empty = a >= b
        overlap = (torch.minimum(b, torch.tensor(HIGH)) - torch.maximum(a, torch.tensor(LOW))).clamp_min(0.0)
        length = torch.where(empty, torch.zeros_like(a), b - a)
        overlap = torch.where(empty, torch.zeros_like(a), overlap)
        return length + (HIGH - LOW) - 2.0 * overlap  # |[a,b] Δ [LOW,HIGH]|


class Halfspaces(ConceptClass):
    name = "halfspace"

    def __init__(self, dim: int, newton_steps: int, eval_points: int, seed: int):
        self.dim, self.vc_dim, self.newton_steps = dim, dim + 1, newton_steps
        self.normal = torch.ones(dim, dtype=torch.float64) / math.sqrt(dim)
        self.x_eval, _ = make_halfspace(eval_points, dim=dim, generator=seeded_generator(seed))

    def sample(self, n, noise, g):
        return make_halfspace(n, dim=self.dim, noise_rate=noise, generator=g)

    def clean(self, x):
        return (x.to(torch.float64) @ self.normal >= 0).long()

    def fit(self, x, y, shard, k):
        return logistic_erm(x, y, shard, k, newton_steps=self.newton_steps)

    def votes(self, model, xq):
        return halfspace_vote_counts(model, xq)

    def disagreement(self, model):
        truth = self.clean(self.x_eval)
        out = []
        for i in range(0, model.shape[0], 2048):  # (block, eval) predictions
            out.append((predict_halfspace(model[i : i + 2048], self.x_eval) != truth).double().mean(1))
        return torch.cat(out)


# ----------------------------------------------------------------------------- one run


def _first_teachers(model, count: int):
    """The first ``count`` teachers (mean teacher error on a subset: halfspaces are scored by sampling)."""
    if isinstance(model, tuple):
        return tuple(part[:count] for part in model)
    return model[:count]


@lru_cache(maxsize=256)
def _calibrate(epsilon: float, delta: float, m: int, t: int, mode: str):
    """The tight calibration takes seconds for T in the thousands: λ is shared across m and seeds."""
    if mode == "tight":
        return tight_calibration(epsilon=epsilon, delta=delta, num_queries=m, max_unstable=t)
    return calibrate(epsilon=epsilon, delta=delta, num_queries=m, max_unstable=t, mode=mode)


def run_hard(cls: ConceptClass, *, n: int, m: int, noise: float, setting, seed_gen: torch.Generator, args) -> dict:
    g_data, g_pub, g_part, g_noise = spawn_generators(seed_gen, 4)
    row: dict = {"k": setting.num_teachers, "T": setting.max_unstable, "shard_size": n / setting.num_teachers}
    x, y = cls.sample(n, noise, g_data)
    xq, _ = cls.sample(m, 0.0, g_pub)  # public features; their labels are never used except to score
    yq = cls.clean(xq)
    t0 = time.perf_counter()
    k = setting.num_teachers
    shard = keyed_shards(n, k, generator=g_part)
    teachers = cls.fit(x, y, shard, k)
    row["teacher_seconds"] = time.perf_counter() - t0  # partition + training
    row["teacher_disagree"] = float(cls.disagreement(_first_teachers(teachers, 512)).mean())
    counts = cls.votes(teachers, xq)  # (m, 2)
    cal = _calibrate(args.epsilon, args.delta, m, setting.max_unstable, setting.mode)
    rel = StabilityReleaser(cal, noise="seeded", generator=g_noise)
    res = rel.release(counts)
    labels = res.labels
    answered = labels >= 0
    wrong = int((answered & (labels != yq)).sum())
    row["answered"] = int(answered.sum())
    row["bottom"] = int(rel.summary()["abstained"])
    row["halted"] = bool(rel.halted)
    row["priv_wrong"] = wrong / m
    row["priv_disagree"] = (wrong + 0.5 * (m - int(answered.sum()))) / m  # ⊥ → uniform random label
    row["vote_disagree"] = float((counts.argmax(1) != yq).double().mean())  # non-private majority
    if int(answered.sum()) > 0:
        student = cls.fit(xq[answered], labels[answered], None, 1)
        row["student_disagree"] = float(cls.disagreement(student)[0])
    else:
        row["student_disagree"] = 0.5
    row["seconds"] = time.perf_counter() - t0
    return row


def nonprivate(cls: ConceptClass, *, n: int, noise: float, seed_gen: torch.Generator) -> float:
    g_data = spawn_generators(seed_gen, 4)[0]  # the same private data as run_hard
    x, y = cls.sample(n, noise, g_data)
    return float(cls.disagreement(cls.fit(x, y, None, 1))[0])


# ----------------------------------------------------------------------------- soft labels


def soft_task(n: int, c: float, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BTT18's example after Def 5.11: x ∈ ±[c, 3c], y = 1[x + z > 0], z ~ N(0, c²/8)."""
    mag = c + 2.0 * c * torch.rand(n, generator=g, dtype=torch.float64)
    sign = torch.where(torch.rand(n, generator=g, dtype=torch.float64) < 0.5, -1.0, 1.0)
    x = sign * mag
    z = torch.randn(n, generator=g, dtype=torch.float64) * (c / math.sqrt(8.0))
    return x, (x + z > 0).to(torch.float64)


def sgd_logistic(x: torch.Tensor, y: torch.Tensor, *, lr: float, t0: float = 10.0) -> torch.Tensor:
    """One pass of SGD on the logistic loss for every row (L learners, n′ points each), in order.

    Step t (from 0) uses lr/(t + t0), so Σ_t η_t grows like log n′ and the learner is
    O(log n′ / n′) on-average stable (Hardt, Recht & Singer 2016, Thm 3.8 for convex losses);
    steps lr/√t would give α ≈ 1/√n′, too unstable for Thm 5.14. Features (1, x). Returns (L, 2).
    """
    w = torch.zeros(x.shape[0], 2, dtype=torch.float64)
    for t in range(x.shape[1]):
        xt, yt = x[:, t], y[:, t]
        p = torch.sigmoid(w[:, 0] + w[:, 1] * xt)
        step = lr / (t + t0)
        w[:, 0] -= step * (p - yt)
        w[:, 1] -= step * (p - yt) * xt
    return w


def soft_scores(w: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(w[:, :1] + w[:, 1:] * xq.reshape(1, -1))  # (L, m)


def run_soft(args, gen: torch.Generator) -> dict:
    g_ref, g_pairs, g_teach, g_q, g_noise, g_j = spawn_generators(gen, 6)
    c, n_prime, m = args.soft_c, args.soft_shard_size, args.soft_queries
    if args.soft_query_range > 0:
        # queries across the decision boundary, where E_D[h_D(x)] spans (0, 1) and a released
        # bin can miss it: the accuracy statement can fail here (on ±[c, 3c] every expected
        # score is within ν of 0 or 1, and the extreme bin contains it by construction)
        xq = (2.0 * torch.rand(m, generator=g_q, dtype=torch.float64) - 1.0) * args.soft_query_range * c
    else:
        xq, _ = soft_task(m, c, g_q)
    # expected score E_D[h_D(x)]: mean of independent learners
    xr, yr = soft_task(args.soft_reference * n_prime, c, g_ref)
    ref = soft_scores(sgd_logistic(xr.view(-1, n_prime), yr.view(-1, n_prime), lr=args.soft_lr), xq)
    expected = ref.mean(0)
    # on-average stability (Def 5.7): paired runs, entry j uniform, replaced by a fresh point
    p = args.soft_pairs
    xd, yd = soft_task(p * n_prime, c, g_pairs)
    xd, yd = xd.view(p, n_prime), yd.view(p, n_prime)
    xz, yz = soft_task(p, c, g_pairs)
    j = torch.randint(0, n_prime, (p,), generator=g_j)
    xr2, yr2 = xd.clone(), yd.clone()
    xr2[torch.arange(p), j] = xz
    yr2[torch.arange(p), j] = yz
    s1 = soft_scores(sgd_logistic(xd, yd, lr=args.soft_lr), xq)
    s2 = soft_scores(sgd_logistic(xr2, yr2, lr=args.soft_lr), xq)
    alpha_q, alpha = on_average_stability(s1, s2)
    nu = args.soft_nu
    weak = ((expected < nu) | (expected > 1 - nu)).double().mean().item()
    gamma_raw = soft_label_gamma(alpha=alpha, shard_size=n_prime, nu=nu)
    gamma = lattice_gamma(min(gamma_raw, 0.5))
    radius = soft_label_radius(alpha=alpha, shard_size=n_prime, nu=nu)
    out = {
        "shard_size": n_prime,
        "queries": m,
        "alpha_hat": alpha,
        "alpha_hat_median_query": float(alpha_q.median()),
        "alpha_sqrt_2n": alpha * math.sqrt(2 * n_prime),
        "nu": nu,
        "weak_quality_fraction": weak,
        "gamma_theorem": gamma_raw,
        "gamma_used": gamma,
        "radius_theorem": radius,
        "reference_learners": args.soft_reference,
        "stability_pairs": p,
    }
    rows = []
    for mode in args.modes:
        if mode == "paper":
            k = math.ceil(
                soft_label_num_teachers(
                    epsilon=args.epsilon, delta=args.delta, num_queries=m, max_unstable=args.soft_T, beta=args.beta
                )
            )
        else:
            k = args.soft_tight_k
        cal = calibrate(
            epsilon=args.epsilon, delta=args.delta, num_queries=m, max_unstable=args.soft_T, mode=mode, soft_labels=True
        )
        xt, yt = soft_task(k * n_prime, c, g_teach)
        scores = soft_scores(sgd_logistic(xt.view(k, n_prime), yt.view(k, n_prime), lr=args.soft_lr), xq)
        rel = SoftLabelReleaser(cal, gamma=gamma, noise="seeded", generator=g_noise)
        res = rel.release(scores.clamp(0.0, 1.0))
        released = res.labels
        ok = ~torch.isnan(released)
        err = (released - expected).abs()
        within = (err[ok] <= radius + 1e-12).double()
        rows.append(
            {
                "mode": mode,
                "k": k,
                "n": k * n_prime,
                "answered": int(ok.sum()),
                "answered_plain": rel.answered_plain,
                "answered_shifted": rel.answered_shifted,
                "bottom": rel.abstained,
                "halted": bool(rel.halted),
                "fraction_within_radius": float(within.mean()) if ok.any() else math.nan,
                "fraction_within_half_gamma": float((err[ok] <= gamma / 2 + 1e-12).double().mean())
                if ok.any()
                else math.nan,
                "fraction_bin_missed": float((err[ok] > gamma / 2 + 1e-12).double().mean()) if ok.any() else math.nan,
                "expected_score_spread": float(expected.max() - expected.min()),
                "max_error": float(err[ok].max()) if ok.any() else math.nan,
                "median_error": float(err[ok].median()) if ok.any() else math.nan,
            }
        )
    out["releases"] = rows
    return out


# ----------------------------------------------------------------------------- driver


def summarize(rows: list[dict], keys: list[str], metrics: list[str]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, rs in groups.items():
        s = dict(zip(keys, key, strict=True))
        s["seeds"] = len(rs)
        for mname in metrics:
            vals = np.array([r[mname] for r in rs if r.get(mname) is not None], dtype=np.float64)
            s[f"{mname}_mean"] = float(vals.mean()) if vals.size else math.nan
            s[f"{mname}_std"] = float(vals.std(ddof=1)) if vals.size > 1 else 0.0
        out.append(s)
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        path.write_text("")
        return
    fields: list[str] = []
    for r in rows:
        fields += [f for f in r if f not in fields]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def plot(out: Path, summary: list[dict], slopes: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def slope(cls_name: str, setting: str, metric: str, mode: str | None) -> float:
        return next(
            (
                x["slope"]
                for x in slopes
                if (x["class"], x["setting"], x["metric"]) == (cls_name, setting, metric)
                and (mode is None or x["mode"] == mode)
            ),
            math.nan,
        )

    for cls_name in sorted({s["class"] for s in summary}):
        for setting in ("realizable", "agnostic"):
            sub = [s for s in summary if s["class"] == cls_name and s["setting"] == setting]
            if not sub:
                continue
            fig, ax = plt.subplots(figsize=(6.4, 4.6))
            curves, lines = [], []
            for mode, marker in (("paper", "o"), ("tight", "s")):
                pts = sorted((s for s in sub if s["mode"] == mode), key=lambda s: s["n"])
                if not pts:
                    continue
                ns = np.array([s["n"] for s in pts], dtype=float)
                for metric, ls in (("priv_disagree", "-"), ("student_disagree", "--")):
                    sl = slope(cls_name, setting, metric, mode)
                    curves.append(
                        {
                            "x": ns,
                            "y": np.array([s[f"{metric}_mean"] for s in pts]),
                            "yerr": np.array([s[f"{metric}_std"] for s in pts]),
                            "marker": marker,
                            "ls": ls,
                            "capsize": 2,
                            "label": f"{mode}: {metric.split('_')[0]} (slope {sl:.2f})",
                        }
                    )
            npr = sorted({(s["n"], s["nonprivate_disagree_mean"]) for s in sub})
            if npr:
                sl = slope(cls_name, setting, "nonprivate_disagree", None)
                lines.append(
                    {
                        "x": [a for a, _ in npr],
                        "y": [b for _, b in npr],
                        "fmt": "k:",
                        "marker": "^",
                        "label": f"non-private ERM on n (slope {sl:.2f})",
                    }
                )
            ns_all = np.array(sorted({s["n"] for s in sub}), dtype=float)
            expo = REALIZABLE_ERROR_EXPONENT if setting == "realizable" else AGNOSTIC_ERROR_EXPONENT
            anchor = [s["priv_disagree_mean"] for s in sub if s["n"] == ns_all[0] and s["priv_disagree_mean"] > 0]
            if anchor:
                lines.append(
                    {
                        "x": ns_all,
                        "y": anchor[0] * (ns_all / ns_all[0]) ** expo,
                        "color": "gray",
                        "alpha": 0.6,
                        "label": f"theorem rate n^{expo:.2f}",
                    }
                )
            loglog_panel(
                ax,
                curves,
                lines,
                title=f"{cls_name}, {setting}",
                xlabel="private sample size n",
                ylabel="disagreement with target (⊥ = random label)",
                legend_fontsize=7,
            )
            fig.tight_layout()
            fig.savefig(out / f"{cls_name}_{setting}.png", dpi=110)
            plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default="pac_curves")
    ap.add_argument("--smoke", action="store_true", help="tiny setting (seconds)")
    ap.add_argument("--classes", nargs="+", default=["threshold", "interval", "halfspace"])
    ap.add_argument("--settings", nargs="+", default=["realizable", "agnostic"])
    ap.add_argument("--modes", nargs="+", default=["paper", "tight"])
    ap.add_argument("--n-min", type=float, default=1e6)
    ap.add_argument("--n-max", type=float, default=1e7)
    ap.add_argument("--n-points", type=int, default=4)
    ap.add_argument("--halfspace-n-max", type=float, default=3e6)
    ap.add_argument("--realizable-query-scale", type=float, default=5e-6, help="m = scale·(n/V)^{4/3}")
    ap.add_argument("--agnostic-query-scale", type=float, default=5e-3, help="m = scale·(n/V)^{4/5}")
    ap.add_argument("--min-queries", type=int, default=100)
    ap.add_argument("--noise", type=float, default=0.05, help="η of the agnostic setting")
    ap.add_argument("--dim", type=int, default=2, help="halfspace dimension d (V = d + 1)")
    ap.add_argument("--newton-steps", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=3.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-soft", action="store_true")
    ap.add_argument("--skip-hard", action="store_true", help="soft-label part only")
    ap.add_argument("--soft-c", type=float, default=1.0)
    ap.add_argument("--soft-shard-size", type=int, default=1000)
    ap.add_argument("--soft-queries", type=int, default=200)
    ap.add_argument("--soft-T", type=int, default=5)
    ap.add_argument("--soft-lr", type=float, default=10.0)
    ap.add_argument("--soft-nu", type=float, default=0.05)
    ap.add_argument("--soft-reference", type=int, default=10000)
    ap.add_argument("--soft-pairs", type=int, default=10000)
    ap.add_argument("--soft-tight-k", type=int, default=2000)
    ap.add_argument(
        "--soft-query-range",
        type=float,
        default=0.0,
        help="r > 0: soft-label queries uniform on [-r·c, r·c] (default 0: the paper's ±[c, 3c])",
    )
    args = ap.parse_args(argv)
    if args.skip_hard:
        args.classes = []
    if args.smoke:
        args.n_min, args.n_max, args.n_points, args.halfspace_n_max = 1e5, 3e5, 2, 2e5
        args.seeds, args.epsilon, args.newton_steps = 1, 8.0, 4
        args.soft_reference, args.soft_pairs, args.soft_shard_size, args.soft_queries = 500, 500, 100, 50
        args.soft_tight_k = 300
    torch.set_num_threads(2)
    out = ROOT / "checkpoints" / args.run
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(vars(args), indent=2))

    classes: dict[str, ConceptClass] = {
        "threshold": Thresholds(),
        "interval": Intervals(),
        "halfspace": Halfspaces(args.dim, args.newton_steps, 2000 if args.smoke else 100_000, args.seed + 1),
    }
    root = seeded_generator(args.seed)
    rows: list[dict] = []
    usability: list[dict] = []
    started = time.perf_counter()
    for cname in args.classes:
        cls = classes[cname]
        n_max = args.halfspace_n_max if cname == "halfspace" else args.n_max
        grid = np.unique(np.round(np.geomspace(args.n_min, n_max, args.n_points)).astype(np.int64))
        for setting in args.settings:
            realizable = setting == "realizable"
            noise = 0.0 if realizable else args.noise
            scale = args.realizable_query_scale if realizable else args.agnostic_query_scale
            for n in grid.tolist():
                m = max(
                    args.min_queries,
                    round(balanced_num_queries(num_samples=n, vc_dim=cls.vc_dim, realizable=realizable, scale=scale)),
                )
                seed_gens = spawn_generators(root, args.seeds)
                npriv = [nonprivate(cls, n=n, noise=noise, seed_gen=_copy(sg)) for sg in seed_gens]
                for mode in args.modes:
                    st = prescribed_num_teachers(
                        num_samples=n,
                        num_queries=m,
                        vc_dim=cls.vc_dim,
                        realizable=realizable,
                        best_error=noise,
                        epsilon=args.epsilon,
                        delta=args.delta,
                        beta=args.beta,
                        mode=mode,
                        round_up_ratio=1.25,
                    )
                    usability.append({"class": cname, "setting": setting, "mode": mode, "n": n, "m": m, **st.to_dict()})
                    print(
                        f"{cname:9s} {setting:10s} {mode:5s} n={n:>9d} m={m:>6d} k={st.num_teachers:>7d} "
                        f"T={st.max_unstable:>5d} {'ok' if st.feasible else 'UNUSABLE: ' + st.reason}",
                        flush=True,
                    )
                    if not st.feasible:
                        continue
                    for s, sg in enumerate(seed_gens):
                        r = run_hard(cls, n=n, m=m, noise=noise, setting=st, seed_gen=_copy(sg), args=args)
                        rows.append(
                            {
                                "class": cname,
                                "setting": setting,
                                "mode": mode,
                                "n": n,
                                "m": m,
                                "seed": s,
                                "nonprivate_disagree": npriv[s],
                                **r,
                            }
                        )
                    last = rows[-1]
                    print(
                        f"    priv={last['priv_disagree']:.4g} bottom={last['bottom']} student="
                        f"{last['student_disagree']:.4g} nonpriv={last['nonprivate_disagree']:.3g} "
                        f"teach={last['teacher_disagree']:.3g} ({last['seconds']:.1f}s)",
                        flush=True,
                    )
    hard_seconds = time.perf_counter() - started
    metrics = [
        "priv_disagree",
        "priv_wrong",
        "bottom",
        "answered",
        "student_disagree",
        "nonprivate_disagree",
        "teacher_disagree",
        "vote_disagree",
        "seconds",
    ]
    summary = summarize(rows, ["class", "setting", "mode", "n", "m", "k", "T"], metrics)
    for s in summary:
        s["nonprivate_disagree_mean"] = s.get("nonprivate_disagree_mean", math.nan)
    slopes: list[dict] = []
    for cname in args.classes:
        for setting in args.settings:
            expo = REALIZABLE_ERROR_EXPONENT if setting == "realizable" else AGNOSTIC_ERROR_EXPONENT
            for mode in args.modes:
                pts = [s for s in summary if s["class"] == cname and s["setting"] == setting and s["mode"] == mode]
                for metric in ("priv_disagree", "student_disagree", "nonprivate_disagree", "teacher_disagree"):
                    sl, _ = loglog_slope([s["n"] for s in pts], [s[f"{metric}_mean"] for s in pts])
                    slopes.append(
                        {
                            "class": cname,
                            "setting": setting,
                            "mode": mode,
                            "metric": metric,
                            "points": len(pts),
                            "slope": sl,
                            "theorem_exponent": expo,
                            "n_range": f"{min((s['n'] for s in pts), default=0)}-"
                            f"{max((s['n'] for s in pts), default=0)}",
                        }
                    )
    write_csv(out / "hard_runs.csv", rows)
    write_csv(out / "hard_summary.csv", summary)
    write_csv(out / "slopes.csv", slopes)
    write_csv(out / "usability.csv", usability)
    largest = max(rows, key=lambda r: (r["n"], r["k"]), default=None)
    report: dict = {
        "hard_seconds": hard_seconds,
        "largest_run": None
        if largest is None
        else {key: largest[key] for key in ("class", "setting", "mode", "n", "m", "k", "teacher_seconds", "seconds")},
        "slopes": slopes,
        "first_usable_n": {
            f"{u['class']}/{u['setting']}/{u['mode']}": min(
                (
                    v["n"]
                    for v in usability
                    if v["feasible"] and (v["class"], v["setting"], v["mode"]) == (u["class"], u["setting"], u["mode"])
                ),
                default=None,
            )
            for u in usability
        },
    }
    if not args.skip_soft:
        t0 = time.perf_counter()
        report["soft"] = run_soft(args, spawn_generators(root, 1)[0])
        report["soft"]["seconds"] = time.perf_counter() - t0
        write_csv(
            out / "soft.csv",
            [{**{k: v for k, v in report["soft"].items() if k != "releases"}, **r} for r in report["soft"]["releases"]],
        )
    report["total_seconds"] = time.perf_counter() - started
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    try:
        plot(out, summary, slopes)
    except Exception as exc:  # plotting is a convenience; the CSVs hold the numbers
        print(f"plotting failed: {exc}")
    for s in slopes:
        if s["metric"] in ("priv_disagree", "student_disagree", "nonprivate_disagree") and s["points"] >= 2:
            print(
                f"slope {s['class']:9s} {s['setting']:10s} {s['mode']:5s} {s['metric']:18s} "
                f"{s['slope']:+.3f} (theorem {s['theorem_exponent']:+.3f}, {s['points']} pts)"
            )
    if "soft" in report:
        print(json.dumps(report["soft"], indent=1))
    print(f"total {report['total_seconds']:.1f}s -> {out}")
    return report


if __name__ == "__main__":
    main()

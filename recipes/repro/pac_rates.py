"""BTT18 §4 PAC rates over ≥ 2.5 decades of n, with bootstrap intervals on the slopes.

Successor of ``recipes/repro/pac_curves.py``'s hard-label part for the 1-D classes (thresholds
V = 1, intervals V = 2), realizable and agnostic (label noise η), halfspaces in R² (V = 3),
realizable only (the agnostic 0–1 ERM of a general halfspace has no window that can be checked,
see :mod:`pate_stab.repro.pac_sim_halfspaces`), and homogeneous halfspaces in R² (through the origin, V =
2), agnostic (``halfspace_homogeneous``: exact ERM by an angular sweep, inputs rotationally
symmetric, error η + (1 − 2η)·|θ − θ*|/π exact), paper calibration (Alg 4 line 1). Per class,
setting and n (geometric grid; halfspaces with more seeds at small n, ``--halfspace-seeds``,
where a seed holds about one error event; ``--agnostic-seeds`` likewise per n):

1. m = scale·(n/V)^{4/3} (realizable) or scale·(n/V)^{4/5} (agnostic) queries (Thm 4.3 / 4.4);
   T and k from the fixed point of :func:`pate_stab.theory.pac.prescribed_num_teachers`.
2. Each seed: teachers, near queries, release (the package's :class:`StabilityReleaser`),
   student, non-private ERM on all n — simulated exactly by :mod:`pate_stab.repro.pac_sim`
   (halfspaces: ``pac_sim_halfspaces``, ``pac_sim_homogeneous``)
   (only the queries within the releaser's noise reach of instability are drawn; the far ones
   are counted; everything float64).
3. Metrics per seed: h_priv's disagreement with the target (⊥ and queries after a halt count ½,
   a random label), its error events (wrong + ⊥ + unanswered), the student's and the
   non-private ERM's disagreement, the mean teacher's.
4. Slopes of log(mean over seeds) on log n with 95 % percentile bootstrap intervals over seeds
   (:func:`pate_stab.theory.pac.bootstrap_loglog_slope`), beside two references: the theorem's
   exponent (−2/3 realizable, −2/5 agnostic) and the slope, over the same grid, of the bound's
   own expression at the run's (k, m, T, ε): Cor 4.1 (ii)'s T/m with T = 3((γ + α)m +
   √(m log(m/β)/2)) at the fixed point's α, γ = 0 (realizable), or minus the 3γ the target's own
   error contributes (agnostic, γ = η: the excess the theorem's rate describes). An interval is
   printed only where every point has ≥ 10 seeds and, for h_priv and the student, ≥ 100 h_priv
   error events (:func:`interval_support`); otherwise the slope is "indicative" (always in --quick).

``--rebound <stem>.json …`` rewrites T/m, its slope and the figure of recorded runs from their
recorded settings (nothing is rerun). ``--cause`` runs the threshold class with m and T fixed
and k, n and ε (hence the threshold w) moved one at a time, and regresses h_priv's error on
log(k/n) and log n (and log w) (:func:`cause_run`).

Outputs under ``--out``: <stem>_runs.csv, <stem>_summary.csv, <stem>_slopes.csv, <stem>.json,
<stem>.png (``--stem``, default pac_rates). ``--jobs`` runs a point's seeds in worker processes
(each run seeds its own generator, so the outputs do not depend on it).

    python recipes/repro/pac_rates.py --classes threshold interval --out docs/results/repro   # 1-D classes
    python recipes/repro/pac_rates.py --classes halfspace --stem pac_rates_halfspace --out docs/results/repro
    python recipes/repro/pac_rates.py --classes halfspace_homogeneous --agnostic-seeds 96 80 64 48 48 \
        --stem pac_rates_halfspace_agnostic --out docs/results/repro
    python recipes/repro/pac_rates.py --quick --out /tmp/pac        # CI: seconds
    python recipes/repro/pac_rates.py --cause --cause-seeds 16 --stem pac_cause --out docs/results/repro
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache, partial
from pathlib import Path

import numpy as np
import torch

from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.privacy.mechanisms.calibration import calibrate, threshold_for_leak
from pate_stab.repro.pac_plot import loglog_panel
from pate_stab.repro.pac_sim import (
    NearQueries,
    agnostic_offsets,
    near_queries,
    realizable_erm_error_limit,
    realizable_offsets,
    shard_sizes,
    student_offset,
)
from pate_stab.repro.pac_sim_halfspaces import (
    halfspace_near_queries,
    halfspace_realizable_lines,
    halfspace_student,
    line_disagreement,
)
from pate_stab.repro.pac_sim_homogeneous import (
    homogeneous_agnostic_directions,
    homogeneous_disagreement,
    homogeneous_error,
)
from pate_stab.rng import seeded_generator
from pate_stab.theory import corollary_max_unstable
from pate_stab.theory.pac import (
    AGNOSTIC_ERROR_EXPONENT,
    REALIZABLE_ERROR_EXPONENT,
    balanced_num_queries,
    bootstrap_log_regression,
    bootstrap_loglog_slope,
    prescribed_num_teachers,
)

# class -> (V, boundaries as fractions of the domain on the label-0 side; the halfspace's line x₂ = ½)
# (the homogeneous halfspace's two boundaries, at ±¼ turn of its direction, share each teacher)
CLASSES = {
    "threshold": (1, (0.5,)),
    "interval": (2, (0.25, 0.25)),
    "halfspace": (3, (0.5,)),
    "halfspace_homogeneous": (2, (-0.25, 0.25)),
}
SETTINGS = {
    "threshold": ("realizable", "agnostic"),
    "interval": ("realizable", "agnostic"),
    "halfspace": ("realizable",),
    "halfspace_homogeneous": ("agnostic",),
}
FAR_FAIL = 1e-9  # total probability that some far query would not be answered with its majority
# A slope's bootstrap interval is shown only when every point has at least MIN_SEEDS seeds and, for
# h_priv and the student (whose errors are h_priv's error events: ⊥, wrong, unanswered), at least
# MIN_ERROR_EVENTS of them; otherwise the slope is printed as "indicative" with no interval
# (at 2–6 seeds and 1–26 events per point, --quick's intervals of two seeds were disjoint).
MIN_SEEDS = 10
MIN_ERROR_EVENTS = 100
EVENT_METRICS = ("priv_disagree", "student_disagree")


def interval_support(metric: str, points: list[dict]) -> tuple[bool, str]:
    """Whether a slope over ``points`` (summary rows) may carry an interval, and why not when it may not."""
    seeds = min(int(p["seeds"]) for p in points)
    why = []
    if seeds < MIN_SEEDS:
        why.append(f"{seeds} seeds at some n (< {MIN_SEEDS})")
    if metric in EVENT_METRICS:
        events = min(int(p["priv_error_events_total"]) for p in points)
        if events < MIN_ERROR_EVENTS:
            why.append(f"{events} h_priv error events at some n (< {MIN_ERROR_EVENTS})")
    return not why, "; ".join(why)


@lru_cache(maxsize=256)
def _cal(epsilon: float, delta: float, m: int, t: int):
    return calibrate(epsilon=epsilon, delta=delta, num_queries=m, max_unstable=t, mode="paper")


def one_run(cname: str, realizable: bool, n: int, m: int, setting, args, seed: int) -> dict:
    """One seed at one n: h_priv, student, non-private ERM, teachers (see the module docstring)."""
    if cname == "halfspace":
        return halfspace_run(n, m, setting, args, seed)
    v, bounds = CLASSES[cname]
    rng = np.random.default_rng([args.seed, seed, n, 0 if realizable else 1, v])
    k = setting.num_teachers
    eta = 0.0 if realizable else args.noise
    t0 = time.perf_counter()
    cal = _cal(args.epsilon, args.delta, m, setting.max_unstable)
    cutoff = cal.threshold + threshold_for_leak(probability=FAR_FAIL / m, noise_scale=cal.noise_scale)
    sizes = shard_sizes(n, k, rng)
    per_boundary = []
    if cname == "halfspace_homogeneous":
        # one direction τ_j per teacher (turns); the lower boundary sees offsets τ_j, the upper −τ_j
        tau, _ = homogeneous_agnostic_directions(sizes, eta, rng, window=args.window)
        per_boundary = [(tau, near_queries(tau, m, cutoff, rng)), (-tau, near_queries(-tau, m, cutoff, rng))]
    for below in bounds if cname != "halfspace_homogeneous" else ():
        if realizable:
            off = realizable_offsets(sizes, below, rng)
        else:
            off, _ = agnostic_offsets(sizes, eta, rng, window=args.window)
        per_boundary.append((off, near_queries(off, m, cutoff, rng)))
    # one stream: the near queries of every boundary in a uniformly random order
    counts_list, owner = [], []
    for i, (_, nq) in enumerate(per_boundary):
        counts_list.append(np.stack([k - nq.ones, nq.ones], axis=1))
        owner.append(np.full(nq.ones.shape[0], i))
    counts = np.concatenate(counts_list) if counts_list else np.zeros((0, 2), dtype=np.int64)
    who = np.concatenate(owner)
    perm = rng.permutation(counts.shape[0])
    counts, who = counts[perm], who[perm]
    rel = StabilityReleaser(cal, noise="seeded", generator=seeded_generator(int(rng.integers(2**62))), num_teachers=k)
    labels = rel.release(torch.from_numpy(counts.astype(np.int64))).labels.numpy() if counts.shape[0] else np.empty(0)
    clean = np.concatenate([nq.clean for _, nq in per_boundary])[perm] if counts.shape[0] else np.empty(0)
    answered = labels >= 0
    wrong_near = int((answered & (labels != clean)).sum())
    bottom = int((~answered).sum())
    far_wrong = sum(nq.far_wrong for _, nq in per_boundary)
    unanswered_far = 0
    if rel.halted and counts.shape[0]:
        # queries after the halt are unanswered: place the near queries in the m-long stream
        pos = np.sort(rng.random(counts.shape[0])) * m
        last = int(np.nonzero(answered)[0].max()) if answered.any() else -1
        p_halt = pos[last] if last >= 0 else 0.0
        after = int(m - p_halt) - (counts.shape[0] - last - 1)
        unanswered_far = max(after, 0)
        far_wrong = int(rng.binomial(far_wrong, p_halt / m)) if far_wrong else 0
    priv = (wrong_near + far_wrong + 0.5 * (bottom + unanswered_far)) / m
    # student per boundary (labels of that boundary's near queries, in their own order)
    student = 0.0
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.shape[0])
    lab_orig = labels[inv] if counts.shape[0] else np.empty(0, dtype=np.int64)
    start = 0
    if cname == "halfspace_homogeneous":
        student = homogeneous_student(per_boundary, lab_orig.astype(np.int64), m, rng)
        teacher = float(homogeneous_disagreement(per_boundary[0][0]).mean())
    for off, nq in per_boundary if cname != "halfspace_homogeneous" else ():
        cnt = nq.ones.shape[0]
        student += abs(student_offset(nq, lab_orig[start : start + cnt].astype(np.int64), off, m, rng))
        start += cnt
    if cname != "halfspace_homogeneous":
        teacher = float(sum(np.mean(np.abs(np.clip(o, -1.0, 1.0))) for o, _ in per_boundary))
    # non-private ERM on all n points (k = 1), float64
    one = np.array([n])
    extra = {}
    if cname == "halfspace_homogeneous":
        tau_np = homogeneous_agnostic_directions(one, eta, rng, window=args.window_np)[0]
        nonpriv = float(homogeneous_disagreement(tau_np)[0])
        # its 0–1 error against the noisy distribution, exact: η + (1 − 2η)·2|τ̂| (turns)
        extra = {"nonprivate_error": float(homogeneous_error(tau_np, eta)[0])}
    elif realizable:
        nonpriv = float(sum(abs(realizable_offsets(one, b, rng)[0]) for b in bounds))
    else:
        nonpriv = float(sum(abs(agnostic_offsets(one, eta, rng, window=args.window_np)[0][0]) for _ in bounds))
    return {
        "priv_disagree": priv,
        "priv_error_events": wrong_near + far_wrong + bottom + unanswered_far,
        "priv_wrong": wrong_near + far_wrong,
        "bottom": bottom,
        "near_queries": int(counts.shape[0]),
        "halted": bool(rel.halted),
        "student_disagree": student,
        "teacher_disagree": teacher,
        "nonprivate_disagree": nonpriv,
        **extra,
        "seconds": time.perf_counter() - t0,
    }


def homogeneous_student(per_boundary: list, labels: np.ndarray, m: int, rng: np.random.Generator) -> float:
    """Disagreement 2|τ̂| of the student's (Alg 5) ERM direction from both boundaries' answered queries.

    ``per_boundary`` holds (teacher offsets, :class:`NearQueries`) for the lower boundary (offsets
    τ_j) and the upper one (−τ_j, mirrored), ``labels`` the released labels of their near queries in
    that order. In direction coordinates the upper queries sit at −(mirrored offset) with their
    labels complemented (⊥ kept); merged, the ERM over τ is :func:`student_offset`'s threshold
    ERM, whose sentinels are the nearest far query of either boundary (density 2m).
    """
    (tau, low), (_, up) = per_boundary
    nl = low.ones.shape[0]
    lab_low, lab_up = labels[:nl], labels[nl:]
    merged = NearQueries(
        offsets=np.concatenate([low.offsets, -up.offsets]),
        ones=np.concatenate([low.ones, up.ones]),
        clean=np.concatenate([low.clean, 1 - up.clean]),
        far_wrong=low.far_wrong + up.far_wrong,
        near_length=low.near_length + up.near_length,
        lo=min([low.lo] * (low.near_length > 0) + [-up.hi] * (up.near_length > 0), default=0.0),
        hi=max([low.hi] * (low.near_length > 0) + [-up.lo] * (up.near_length > 0), default=0.0),
    )
    merged_labels = np.concatenate([lab_low, np.where(lab_up >= 0, 1 - lab_up, lab_up)])
    t = student_offset(merged, merged_labels.astype(np.int64), tau, 2 * m, rng)
    return float(homogeneous_disagreement(t))


def halfspace_run(n: int, m: int, setting, args, seed: int) -> dict:
    """One seed of the realizable halfspace in R² (:mod:`pate_stab.repro.pac_sim_halfspaces`)."""
    rng = np.random.default_rng([args.seed, seed, n, 0, 3])
    k = setting.num_teachers
    t0 = time.perf_counter()
    cal = _cal(args.epsilon, args.delta, m, setting.max_unstable)
    cutoff = cal.threshold + threshold_for_leak(probability=FAR_FAIL / m, noise_scale=cal.noise_scale)
    sizes = shard_sizes(n, k, rng)
    alpha, beta, info = halfspace_realizable_lines(sizes, rng)
    hq = halfspace_near_queries(alpha, beta, m, cutoff, rng, bins=args.halfspace_bins)
    q = hq.ones.shape[0]
    perm = rng.permutation(q)
    counts = np.stack([k - hq.ones, hq.ones], axis=1)[perm]
    rel = StabilityReleaser(cal, noise="seeded", generator=seeded_generator(int(rng.integers(2**62))), num_teachers=k)
    labels = rel.release(torch.from_numpy(counts.astype(np.int64))).labels.numpy() if q else np.empty(0, dtype=np.int64)
    clean = hq.clean[perm]
    answered = labels >= 0
    wrong_near = int((answered & (labels != clean)).sum())
    bottom = int((~answered).sum())
    far_wrong, unanswered_far = hq.far_wrong, 0
    if rel.halted and q:  # as in one_run: queries after the halt are unanswered
        pos = np.sort(rng.random(q)) * m
        last = int(np.nonzero(answered)[0].max()) if answered.any() else -1
        p_halt = pos[last] if last >= 0 else 0.0
        unanswered_far = max(int(m - p_halt) - (q - last - 1), 0)
        far_wrong = int(rng.binomial(far_wrong, p_halt / m)) if far_wrong else 0
    priv = (wrong_near + far_wrong + 0.5 * (bottom + unanswered_far)) / m
    inv = np.empty_like(perm)
    inv[perm] = np.arange(q)
    sa, sb, separable, verified = halfspace_student(hq, labels[inv].astype(np.int64) if q else labels)
    # non-private ERM on all n points: the same rule with k = 1, float64
    na, nb, _ = halfspace_realizable_lines(np.array([n]), rng)
    return {
        "priv_disagree": priv,
        "priv_error_events": wrong_near + far_wrong + bottom + unanswered_far,
        "priv_wrong": wrong_near + far_wrong,
        "bottom": bottom,
        "near_queries": q,
        "halted": bool(rel.halted),
        "student_disagree": float(line_disagreement(np.array(sa), np.array(sb))),
        "student_separable": separable,
        "student_verified": verified,
        "teacher_disagree": float(line_disagreement(alpha, beta).mean()),
        "teacher_window_rounds": info["rounds"],
        "teacher_whole_square": info["whole"],
        "vote_candidates": hq.candidates,
        "nonprivate_disagree": float(line_disagreement(na, nb)[0]),
        "seconds": time.perf_counter() - t0,
    }


def bound_excess(setting, m: int, realizable: bool, noise: float, beta: float) -> float:
    """Cor 4.1 (ii): T/m with T = ⌈3((γ + α)m + √(m log(m/β)/2))⌉ at the fixed point's α; minus 3γ when agnostic.

    γ = 0 when realizable (the target is in the class), γ = ``noise`` (η, random label noise)
    when agnostic; the agnostic value is the excess T/m − 3γ the theorem's rate describes.
    """
    gamma = 0.0 if realizable else noise
    t = corollary_max_unstable(num_queries=m, alpha=setting.teacher_alpha, beta=beta, best_error=gamma)
    return t / m - 3.0 * gamma


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("checkpoints/pac_rates"))
    ap.add_argument(
        "--quick",
        action="store_true",
        help="CI mode: every class and setting, 2–3 n, 2–6 seeds (seconds); its slopes are indicative (no interval)",
    )
    ap.add_argument("--classes", nargs="+", default=list(CLASSES))
    ap.add_argument("--settings", nargs="+", default=["realizable", "agnostic"])
    ap.add_argument("--realizable-n", type=float, nargs=2, default=[1e6, 1e9], help="n range (geometric)")
    ap.add_argument("--agnostic-n", type=float, nargs=2, default=[1e7, 10**9.5])
    ap.add_argument("--realizable-points", type=int, default=7)
    ap.add_argument("--agnostic-points", type=int, default=5)
    ap.add_argument("--realizable-query-scale", type=float, default=5e-6)
    ap.add_argument("--agnostic-query-scale", type=float, default=5e-3)
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--window", type=float, default=10.0, help="agnostic teachers: expected points per side")
    ap.add_argument("--window-np", type=float, default=4000.0, help="agnostic non-private ERM window")
    ap.add_argument("--realizable-seeds", type=int, default=48)
    ap.add_argument(
        "--agnostic-seeds",
        type=int,
        nargs="+",
        default=[24],
        help="seeds per n (one value: every n; or one per --agnostic-points)",
    )
    ap.add_argument("--halfspace-n", type=float, nargs=2, default=[1e6, 10**8.5], help="halfspace n range")
    ap.add_argument("--halfspace-points", type=int, default=6)
    ap.add_argument(
        "--halfspace-seeds",
        type=int,
        nargs="+",
        default=[256, 128, 64, 32, 16, 16],
        help="seeds per n (one value: every n); more at small n, where a seed holds about one error event",
    )
    ap.add_argument("--halfspace-bins", type=int, default=32, help="u-bins of the halfspace vote bounds")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--epsilon", type=float, default=3.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--beta", type=float, default=0.05)
    ap.add_argument(
        "--seed",
        type=int,
        default=0,
        help="base seed: run s at n draws from the generator seeded by (seed, s, n, setting, V), and the "
        "slopes' bootstrap from seed; a new value gives an independent replicate of the whole sweep",
    )
    ap.add_argument(
        "--cause",
        action="store_true",
        help="instead of the sweep: threshold class, m and T fixed at n0's, k and n (and ε, hence w) "
        "moved one at a time; writes <stem>.json and <stem>_runs.csv (see cause_run)",
    )
    ap.add_argument("--cause-n0", type=float, default=1e7, help="--cause: base n (m, T, k0 are Alg 4's there)")
    ap.add_argument("--cause-setting", choices=["realizable", "agnostic"], default="realizable")
    ap.add_argument("--cause-n-factors", type=float, nargs="+", default=[1.0, 3.1623, 10.0, 31.623])
    ap.add_argument("--cause-k-n", type=float, default=1e8, help="--cause: the n at which k is varied")
    ap.add_argument("--cause-k-factors", type=float, nargs="+", default=[1.0, 2.0, 4.0, 8.0])
    ap.add_argument("--cause-epsilons", type=float, nargs="*", default=[1.5, 6.0])
    ap.add_argument("--cause-seeds", type=int, default=8, help="--cause: seeds at n0 (scaled by n/n0 elsewhere)")
    ap.add_argument(
        "--rebound",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="recompute Cor 4.1's T/m, its slope and the figure of recorded <stem>.json files in place "
        "(a function of the recorded settings; nothing is rerun) and exit",
    )
    ap.add_argument(
        "--jobs", type=int, default=1, help="processes running a point's seeds (results do not depend on it)"
    )
    ap.add_argument("--stem", default="pac_rates", help="output file names: <stem>.json, <stem>_summary.csv, ...")
    args = ap.parse_args(argv)
    if args.cause:
        torch.set_num_threads(1)
        args.out.mkdir(parents=True, exist_ok=True)
        res = cause_run(args)
        rows = res.pop("rows")
        res["config"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        (args.out / f"{args.stem}.json").write_text(json.dumps(res, indent=1))
        _csv(args.out / f"{args.stem}_runs.csv", rows)
        for name, reg in res["regressions"].items():
            print(name, json.dumps(reg))
        print(f"wall {res['wall_seconds']:.0f}s, CPU {res['cpu_seconds']:.0f}s -> {args.out}")
        return res
    if args.rebound:
        for path in args.rebound:
            report = rebound(json.loads(path.read_text()))
            write_outputs(path.parent, path.stem, report, None)
            print(f"rewrote {path.stem}.json, _summary.csv, _slopes.csv, .png from the recorded settings")
        return {}
    if args.jobs < 1:
        ap.error(f"--jobs must be >= 1, got {args.jobs}")
    if len(args.halfspace_seeds) not in (1, args.halfspace_points):
        ap.error(f"--halfspace-seeds: one value or --halfspace-points ({args.halfspace_points}) values")
    if len(args.agnostic_seeds) not in (1, args.agnostic_points):
        ap.error(f"--agnostic-seeds: one value or --agnostic-points ({args.agnostic_points}) values")
    unknown = [c for c in args.classes if c not in CLASSES]
    if unknown:
        ap.error(f"--classes: unknown {unknown}; known {list(CLASSES)}")
    if args.quick:
        args.realizable_n, args.realizable_points, args.realizable_seeds = [1e6, 1e7], 3, 6
        args.agnostic_n, args.agnostic_points, args.agnostic_seeds = [1e7, 3e7], 2, [2]
        args.halfspace_n, args.halfspace_points, args.halfspace_seeds = [1e6, 3e6], 2, [3]
        args.bootstrap = 200
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    # each run seeds its own generator from (seed, run, n, setting, V): the pool changes nothing but time
    pool = (
        ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("fork"))
        if args.jobs > 1
        else None
    )
    started = time.perf_counter()
    rows: list[dict] = []
    summary: list[dict] = []
    for cname in args.classes:
        v, bounds = CLASSES[cname]
        for setting_name in [x for x in args.settings if x in SETTINGS[cname]]:
            realizable = setting_name == "realizable"
            lo, hi = args.realizable_n if realizable else args.agnostic_n
            scale = args.realizable_query_scale if realizable else args.agnostic_query_scale
            points = args.realizable_points if realizable else args.agnostic_points
            if cname == "halfspace":
                lo, hi = args.halfspace_n
                points = args.halfspace_points
            grid = np.unique(np.round(np.geomspace(lo, hi, points)).astype(np.int64)).tolist()
            if cname == "halfspace":
                hs = [int(x) for x in args.halfspace_seeds]
                per_n = hs if len(hs) > 1 else hs * len(grid)
                if len(per_n) != len(grid):
                    raise ValueError(f"--halfspace-seeds: one value or {len(grid)} (one per n), got {len(per_n)}")
            elif realizable:
                per_n = [args.realizable_seeds] * len(grid)
            else:
                ag = [int(x) for x in args.agnostic_seeds]
                per_n = ag if len(ag) > 1 else ag * len(grid)
                if len(per_n) != len(grid):
                    raise ValueError(f"--agnostic-seeds: one value or {len(grid)} (one per n), got {len(per_n)}")
            for n, n_seeds in zip(grid, per_n, strict=True):
                m = max(100, round(balanced_num_queries(num_samples=n, vc_dim=v, realizable=realizable, scale=scale)))
                st = prescribed_num_teachers(
                    num_samples=n,
                    num_queries=m,
                    vc_dim=v,
                    realizable=realizable,
                    best_error=0.0 if realizable else args.noise,
                    epsilon=args.epsilon,
                    delta=args.delta,
                    beta=args.beta,
                    mode="paper",
                    round_up_ratio=1.25,
                )
                head = {"class": cname, "setting": setting_name, "n": n, "m": m, "k": st.num_teachers}
                if not st.feasible:
                    print(f"{cname} {setting_name} n={n}: unusable ({st.reason})", flush=True)
                    summary.append({**head, "T": st.max_unstable, "usable": False, "reason": st.reason})
                    continue
                t0 = time.perf_counter()
                task = partial(one_run, cname, realizable, n, m, st, args)
                runs = list(pool.map(task, range(n_seeds))) if pool else [task(s) for s in range(n_seeds)]
                for s, r in enumerate(runs):
                    rows.append({**head, "T": st.max_unstable, "seed": s, **r})
                agg = {
                    **head,
                    "T": st.max_unstable,
                    "usable": True,
                    "shard_size": n / st.num_teachers,
                    "teacher_alpha": st.teacher_alpha,
                    "bound_T_over_m": bound_excess(st, m, realizable, args.noise, args.beta),
                    "seeds": len(runs),
                    "priv_error_events_total": int(sum(r["priv_error_events"] for r in runs)),
                    "priv_wrong_total": int(sum(r["priv_wrong"] for r in runs)),
                    "bottom_total": int(sum(r["bottom"] for r in runs)),
                    "halted_runs": int(sum(r["halted"] for r in runs)),
                    **(
                        {
                            "student_nonseparable_runs": int(sum(not r["student_separable"] for r in runs)),
                            "student_unverified_runs": int(sum(not r["student_verified"] for r in runs)),
                            "teacher_whole_square_total": int(sum(r["teacher_whole_square"] for r in runs)),
                        }
                        if cname == "halfspace"
                        else {}
                    ),
                    "nonprivate_limit": realizable_erm_error_limit(n, len(bounds)) if realizable else math.nan,
                    "seconds": time.perf_counter() - t0,
                }
                for key in ("priv_disagree", "student_disagree", "nonprivate_disagree", "teacher_disagree"):
                    vals = np.array([r[key] for r in runs])
                    agg[f"{key}_mean"] = float(vals.mean())
                    agg[f"{key}_se"] = float(vals.std(ddof=1) / math.sqrt(len(vals))) if len(vals) > 1 else 0.0
                summary.append(agg)
                print(
                    f"{cname:9s} {setting_name:10s} n={n:.2e} m={m} k={st.num_teachers} T={st.max_unstable} "
                    f"priv={agg['priv_disagree_mean']:.3g} events={agg['priv_error_events_total']} "
                    f"student={agg['student_disagree_mean']:.3g} nonpriv={agg['nonprivate_disagree_mean']:.3g} "
                    f"bound={agg['bound_T_over_m']:.3g} ({agg['seconds']:.1f}s)",
                    flush=True,
                )
    slopes = fit_slopes(rows, summary, args)
    total = time.perf_counter() - started
    report = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "seconds": total,
        "summary": summary,
        "slopes": slopes,
    }
    if pool:
        pool.shutdown()
    write_outputs(args.out, args.stem, report, rows)
    for s in slopes:
        print(
            f"slope {s['class']:9s} {s['setting']:10s} {s['metric']:20s} {slope_text(s)} "
            f"theorem {s['theorem_exponent']:+.3f} bound {s['bound_slope']:+.3f} decades {s['decades']:.2f}"
        )
    print(f"total {total:.0f}s -> {args.out}")
    return report


def cause_points(args) -> list[dict]:
    """The separated grid of ``--cause``: (set, n, k, ε, seeds), m and T held at their values at n0.

    Set "n": k = k0 (Alg 4's k at n0), n = n0·factor; set "k": n = ``cause_k_n``, k = k0·factor
    (a point in both is run once, set "n+k");
    set "eps": n = n0, k = k0, ε varied (so the threshold w alone moves). Seeds scale with n/n0
    (set "n") or ``cause_k_n``/n0 (sets "k"), so that each point holds about as many error events
    as the base point (the error falls about as 1/n).
    """
    n0 = int(args.cause_n0)
    pts = []
    for f in args.cause_n_factors:
        n = int(round(n0 * f))
        pts.append(
            {
                "set": "n",
                "n": n,
                "k_factor": 1.0,
                "epsilon": args.epsilon,
                "seeds": math.ceil(args.cause_seeds * n / n0),
            }
        )
    nk = int(args.cause_k_n)
    for f in args.cause_k_factors:
        same = [q for q in pts if q["set"] == "n" and q["n"] == nk and f == 1.0]
        if same:  # the same (n, k, ε) as a point of set "n": one point, in both sets
            same[0]["set"] = "n+k"
            continue
        pts.append(
            {
                "set": "k",
                "n": nk,
                "k_factor": float(f),
                "epsilon": args.epsilon,
                "seeds": math.ceil(args.cause_seeds * nk / n0),
            }
        )
    for e in args.cause_epsilons:
        pts.append({"set": "eps", "n": n0, "k_factor": 1.0, "epsilon": float(e), "seeds": args.cause_seeds})
    return pts


def cause_run(args) -> dict:
    """``--cause``: h_priv's error with k, n and the threshold w moved one at a time (threshold class).

    ``--cause-setting`` picks realizable or agnostic (label noise ``--noise``) teachers.

    m and T are those Alg 4 prescribes at n0 (:func:`prescribed_num_teachers`, as in the sweep)
    and stay fixed, so the calibration (λ, w) changes only in the "eps" set. Every point runs
    :func:`one_run` with k teachers; the error is regressed on (1, log(k/n), log n) over the "n"
    and "k" sets and on (1, log(k/n), log n, log w) over all points
    (:func:`~pate_stab.theory.pac.bootstrap_log_regression`, bootstrap over seeds).
    """
    n0 = int(args.cause_n0)
    realizable = args.cause_setting == "realizable"
    scale = args.realizable_query_scale if realizable else args.agnostic_query_scale
    m = max(100, round(balanced_num_queries(num_samples=n0, vc_dim=1, realizable=realizable, scale=scale)))
    st = prescribed_num_teachers(
        num_samples=n0,
        num_queries=m,
        vc_dim=1,
        realizable=realizable,
        best_error=0.0 if realizable else args.noise,
        epsilon=args.epsilon,
        delta=args.delta,
        beta=args.beta,
        mode="paper",
        round_up_ratio=1.25,
    )
    wall0, cpu0 = time.perf_counter(), time.process_time()
    points, rows = [], []
    for p in cause_points(args):
        k = int(round(st.num_teachers * p["k_factor"]))
        cal = _cal(p["epsilon"], args.delta, m, st.max_unstable)
        run_args = argparse.Namespace(**{**vars(args), "epsilon": p["epsilon"]})
        setting = argparse.Namespace(num_teachers=k, max_unstable=st.max_unstable)
        t0 = time.perf_counter()
        runs = [one_run("threshold", realizable, p["n"], m, setting, run_args, s) for s in range(p["seeds"])]
        priv = np.array([r["priv_disagree"] for r in runs])
        point = {
            **p,
            "k": k,
            "m": m,
            "T": st.max_unstable,
            "threshold_w": cal.threshold,
            "noise_scale": cal.noise_scale,
            "priv_disagree_mean": float(priv.mean()),
            "priv_disagree_se": float(priv.std(ddof=1) / math.sqrt(priv.size)) if priv.size > 1 else 0.0,
            "priv_error_events_total": int(sum(r["priv_error_events"] for r in runs)),
            "priv_wrong_total": int(sum(r["priv_wrong"] for r in runs)),
            "halted_runs": int(sum(r["halted"] for r in runs)),
            "teacher_disagree_mean": float(np.mean([r["teacher_disagree"] for r in runs])),
            "seconds": time.perf_counter() - t0,
        }
        point["n_times_error_over_w"] = point["priv_disagree_mean"] * p["n"] / cal.threshold
        points.append(point)
        rows += [
            {"set": p["set"], "n": p["n"], "k": k, "epsilon": p["epsilon"], "seed": s, **r} for s, r in enumerate(runs)
        ]
        print(
            f"cause {p['set']:3s} n={p['n']:.3g} k={k} eps={p['epsilon']:g} w={cal.threshold:.0f} seeds={p['seeds']} "
            f"priv={point['priv_disagree_mean']:.3g} events={point['priv_error_events_total']} "
            f"n*err/w={point['n_times_error_over_w']:.3f} teacher={point['teacher_disagree_mean']:.3g} "
            f"({point['seconds']:.1f}s)",
            flush=True,
        )
    regressions = {}
    for name, sets, cols in (
        ("k_over_n_and_n", ("n", "k"), ("intercept", "log(k/n)", "log n")),
        ("k_over_n_n_and_w", ("n", "k", "eps"), ("intercept", "log(k/n)", "log n", "log w")),
    ):
        use = [(i, q) for i, q in enumerate(points) if set(q["set"].split("+")) & set(sets)]
        design = [
            [1.0, math.log(q["k"] / q["n"]), math.log(q["n"]), math.log(q["threshold_w"])][: len(cols)] for _, q in use
        ]
        per = [
            [
                r["priv_disagree"]
                for r in rows
                if (r["set"], r["n"], r["k"], r["epsilon"]) == (q["set"], q["n"], q["k"], q["epsilon"])
            ]
            for _, q in use
        ]
        try:
            fit = bootstrap_log_regression(design, per, names=cols, reps=args.bootstrap, seed=args.seed)
            regressions[name] = {"points": len(use), **fit.to_dict()}
        except ValueError as exc:  # e.g. no "eps" points: log w is constant
            regressions[name] = {"points": len(use), "skipped": str(exc)}
    return {
        "base": {
            "class": "threshold",
            "setting": args.cause_setting,
            "n0": n0,
            "m": m,
            "T": st.max_unstable,
            "k0": st.num_teachers,
            "epsilon": args.epsilon,
        },
        "points": points,
        "regressions": regressions,
        "rows": rows,
        "wall_seconds": time.perf_counter() - wall0,
        "cpu_seconds": time.process_time() - cpu0,
    }


def rebound(report: dict) -> dict:
    """A recorded report with Cor 4.1's T/m (and its slope) recomputed by :func:`bound_excess`.

    T/m is a function of the recorded settings (m, the fixed point's α, γ, β), so no run is
    repeated: each usable summary row's ``bound_T_over_m`` and each slope row's ``bound_slope``
    (least squares of log T/m on log n over the usable points, as in :func:`fit_slopes`) and
    ``excludes_bound`` are rewritten; everything else is kept.
    """
    cfg = report["config"]
    out = json.loads(json.dumps(report))
    for s in out["summary"]:
        if s.get("usable"):
            setting = argparse.Namespace(teacher_alpha=s["teacher_alpha"])
            s["bound_T_over_m"] = bound_excess(
                setting, int(s["m"]), s["setting"] == "realizable", float(cfg["noise"]), float(cfg["beta"])
            )
    for sl in out["slopes"]:
        pts = [
            s for s in out["summary"] if (s["class"], s["setting"]) == (sl["class"], sl["setting"]) and s.get("usable")
        ]
        ns = np.array([p["n"] for p in pts], dtype=float)
        sl["bound_slope"] = float(np.polyfit(np.log(ns), np.log([p["bound_T_over_m"] for p in pts]), 1)[0])
        sl["excludes_bound"] = not (sl["ci_low"] <= sl["bound_slope"] <= sl["ci_high"])
        sl["interval_supported"], sl["indicative_because"] = interval_support(sl["metric"], pts)
    return out


def write_outputs(out: Path, stem: str, report: dict, rows: list[dict] | None) -> None:
    """<stem>.json, <stem>_summary.csv, <stem>_slopes.csv, <stem>.png (and <stem>_runs.csv when ``rows``)."""
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    if rows is not None:
        _csv(out / f"{stem}_runs.csv", rows)
    _csv(out / f"{stem}_summary.csv", report["summary"])
    _csv(out / f"{stem}_slopes.csv", report["slopes"])
    try:
        plot(out / f"{stem}.png", report["summary"], report["slopes"])
    except Exception as exc:  # the numbers are in the CSV / JSON
        print(f"plot failed: {exc}")


def fit_slopes(rows: list[dict], summary: list[dict], args) -> list[dict]:
    out = []
    for cname in args.classes:
        for setting_name in [x for x in args.settings if x in SETTINGS[cname]]:
            realizable = setting_name == "realizable"
            pts = [s for s in summary if s["class"] == cname and s["setting"] == setting_name and s.get("usable")]
            if len(pts) < 2:
                continue
            ns = np.array([p["n"] for p in pts], dtype=float)
            bound_slope = float(np.polyfit(np.log(ns), np.log([p["bound_T_over_m"] for p in pts]), 1)[0])
            expo = REALIZABLE_ERROR_EXPONENT if realizable else AGNOSTIC_ERROR_EXPONENT
            for metric in ("priv_disagree", "student_disagree", "nonprivate_disagree", "teacher_disagree"):
                per = [
                    np.array(
                        [r[metric] for r in rows if (r["class"], r["setting"], r["n"]) == (cname, setting_name, p["n"])]
                    )
                    for p in pts
                ]
                fit = bootstrap_loglog_slope(ns, per, reps=args.bootstrap, seed=args.seed)
                ref = -1.0 if metric == "nonprivate_disagree" and realizable else expo
                out.append(
                    {
                        "class": cname,
                        "setting": setting_name,
                        "metric": metric,
                        "points": len(pts),
                        "decades": float(np.log10(ns.max() / ns.min())),
                        "slope": fit.slope,
                        "ci_low": fit.low,
                        "ci_high": fit.high,
                        "theorem_exponent": ref,
                        "bound_slope": bound_slope,
                        "excludes_theorem": not (fit.low <= ref <= fit.high),
                        "excludes_bound": not (fit.low <= bound_slope <= fit.high),
                        "min_error_events_per_point": min(p["priv_error_events_total"] for p in pts)
                        if metric == "priv_disagree"
                        else None,
                    }
                )
                out[-1]["interval_supported"], out[-1]["indicative_because"] = interval_support(metric, pts)
    return out


def slope_text(s: dict) -> str:
    """ "+0.123 [+0.100, +0.150]" when the interval is supported, else "+0.123 indicative (why)"."""
    if s.get("interval_supported", True):
        return f"{s['slope']:+.3f} [{s['ci_low']:+.3f}, {s['ci_high']:+.3f}]"
    return f"{s['slope']:+.3f} indicative, no interval ({s['indicative_because']})"


def _csv(path: Path, rows: list[dict]) -> None:
    fields: list[str] = []
    for r in rows:
        fields += [f for f in r if f not in fields]
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def plot(path: Path, summary: list[dict], slopes: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(s["class"], s["setting"]) for s in summary if s.get("usable")})
    fig, axes = plt.subplots(1, max(len(groups), 1), figsize=(4.2 * max(len(groups), 1), 4.0), squeeze=False)
    for i, (ax, (cname, setting)) in enumerate(zip(axes[0], groups, strict=False)):
        pts = sorted(
            (s for s in summary if s["class"] == cname and s["setting"] == setting and s.get("usable")),
            key=lambda s: s["n"],
        )
        ns = np.array([p["n"] for p in pts], dtype=float)
        curves = []
        for metric, style in (("priv_disagree", "o-"), ("student_disagree", "s--"), ("nonprivate_disagree", "^:")):
            sl = next(x for x in slopes if (x["class"], x["setting"], x["metric"]) == (cname, setting, metric))
            curves.append(
                {
                    "x": ns,
                    "y": np.array([p[f"{metric}_mean"] for p in pts]),
                    "yerr": 1.96 * np.array([p[f"{metric}_se"] for p in pts]),
                    "fmt": style,
                    "ms": 4,
                    "capsize": 2,
                    "label": f"{metric.split('_')[0]} {sl['slope']:+.2f} "
                    + (
                        f"[{sl['ci_low']:+.2f},{sl['ci_high']:+.2f}]"
                        if sl.get("interval_supported", True)
                        else "(indicative)"
                    ),
                }
            )
        bound = {
            "x": ns,
            "y": [p["bound_T_over_m"] for p in pts],
            "fmt": "k-",
            "lw": 0.8,
            "label": "Cor 4.1 bound T/m" + ("" if setting == "realizable" else " − 3γ"),
        }
        loglog_panel(
            ax,
            curves,
            [bound],
            title=f"{cname}, {setting}",
            xlabel="n",
            ylabel="disagreement with the target" if i == 0 else None,
            legend_fontsize=6,
        )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()

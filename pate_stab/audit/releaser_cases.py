"""The stability releasers' computation vectorised over independent runs, for statistical DP tests.

:func:`~pate_stab.audit.harness.dp_test` needs 10^5 runs of a mechanism; the releasers are online
objects that run one query (and, in secure mode, one noise draw) at a time. The functions here
compute what :class:`~pate_stab.aggregation.releaser.StabilityReleaser` and
:class:`~pate_stab.aggregation.soft_labels.SoftLabelReleaser` compute, for R runs at once, from
noise handed in. They consume the noise in the releasers' own order — the s-th threshold value
for the s-th sparse-vector segment, the j-th query value for the j-th test that runs — so that
``tests/audit/test_releaser_cases.py`` can replay the noise a real releaser drew and check that the
outputs agree exactly, in both noise modes. The noise itself comes from the library's samplers:
the sparse vector's own two noise sources in bulk
(:func:`pate_stab.privacy.mechanisms.sparse_vector.sparse_vector_noise`:
float64 Laplace, ``noise="seeded"``, or exact discrete Laplace at the rounded-up rational scale
the secure releasers use, ``noise="secure"``), and the hard releaser runs the sparse vector's own
scan (:func:`pate_stab.privacy.mechanisms.sparse_vector.above_threshold_scan`), the core
:class:`~pate_stab.privacy.mechanisms.sparse_vector.SparseVector` runs in both modes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from pate_stab._checks import check_int
from pate_stab.aggregation.releaser import secure_sparse_vector
from pate_stab.aggregation.soft_labels import BOTTOM, PLAIN, SHIFTED
from pate_stab.aggregation.votes import (
    distance_to_instability,
    gamma_histogram,
    num_bins,
    shifted_gamma_histogram,
    top_label,
)
from pate_stab.audit.harness import Mechanism, MechanismCase
from pate_stab.privacy.mechanisms.calibration import calibrate, paper_threshold
from pate_stab.privacy.mechanisms.sparse_vector import NOT_PROCESSED, PASSED, above_threshold_scan, sparse_vector_noise

__all__ = [
    "releaser_noise",
    "soft_release_scan",
    "soft_output_codes",
    "soft_releaser_mechanism",
    "hard_releaser_mechanism",
    "soft_vote_sets",
    "hard_vote_sets",
    "dist_zero_soft_pair",
    "releaser_cases",
    "releaser_mutation_cases",
]


releaser_noise = sparse_vector_noise
"""Threshold and query noise in bulk, as a releaser in mode ``noise`` draws them: the sparse vector's
own noise sources (:func:`pate_stab.privacy.mechanisms.sparse_vector.sparse_vector_noise`)."""


def soft_release_scan(
    plain_dist: torch.Tensor,
    shifted_dist: torch.Tensor,
    query_noise: torch.Tensor,
    threshold_noise: torch.Tensor,
    *,
    threshold: float | int,
    max_failures: int,
) -> torch.Tensor:
    """Status codes of :meth:`SoftLabelReleaser.release` for R runs (BTT18 Alg 6 with Alg 8).

    Query i: test 1 compares ``plain_dist[i] + Q`` with ``threshold + V_s``; on ⊥ the segment
    ends (s + 1) and, unless that was the cutoff, test 2 compares ``shifted_dist[i] + Q'`` with
    the fresh ``threshold + V_{s+1}``. Runs halt after ``max_failures`` (2T) failed tests.

    Args:
        plain_dist, shifted_dist: (m,) integer distances to instability of the two histograms.
        query_noise: (R, >= 2m), already scaled; run r's j-th test uses ``query_noise[r, j]``.
        threshold_noise: (R, >= max_failures), already scaled; segment s uses column s.
        threshold: w (an integer for integer noise).
        max_failures: 2T.

    Returns:
        (R, m) int8: 1 plain, 2 shifted, 0 ⊥, −1 not processed (:mod:`pate_stab.aggregation.soft_labels`).
    """
    max_failures = check_int("max_failures", max_failures, minimum=1)
    runs, m = query_noise.shape[0], plain_dist.numel()
    if (
        query_noise.shape[1] < 2 * m
        or threshold_noise.shape != (runs, threshold_noise.shape[1])
        or (threshold_noise.shape[1] < max_failures)
    ):
        raise ValueError("need query_noise (R, >= 2m) and threshold_noise (R, >= max_failures)")
    exact = not query_noise.is_floating_point()
    pd = plain_dist.to(torch.int64 if exact else torch.float64)
    sd = shifted_dist.to(torch.int64 if exact else torch.float64)
    rows = torch.arange(runs)
    failures = torch.zeros(runs, dtype=torch.int64)
    tests = torch.zeros(runs, dtype=torch.int64)
    status = torch.full((runs, m), NOT_PROCESSED, dtype=torch.int8)

    def passes(value: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        level = threshold + threshold_noise[rows, failures.clamp(max=max_failures - 1)]
        ok = active & (value + query_noise[rows, tests.clamp(max=query_noise.shape[1] - 1)] > level)
        tests.add_(active.to(torch.int64))
        failures.add_((active & ~ok).to(torch.int64))
        return ok

    for i in range(m):
        alive = failures < max_failures
        plain_ok = passes(pd[i], alive)
        plain_failed = alive & ~plain_ok
        shifted_ok = passes(sd[i], plain_failed & (failures < max_failures))
        code = torch.where(plain_ok, PLAIN, torch.where(shifted_ok, SHIFTED, BOTTOM))
        status[:, i] = torch.where(alive, code, NOT_PROCESSED).to(torch.int8)
    return status


def soft_output_codes(
    status: torch.Tensor, plain_top: torch.Tensor, shifted_top: torch.Tensor, bins: int
) -> torch.Tensor:
    """Released outputs as integer codes: 1 + plain bin, 1 + bins + shifted bin, 0 for ⊥, −1 not processed.

    The released score is a function of the code, and the code of the release: testing codes
    tests the release.
    """
    status = status.to(torch.int64)
    code = torch.where(status == PLAIN, 1 + plain_top, torch.where(status == SHIFTED, 1 + bins + shifted_top, 0))
    return torch.where(status == NOT_PROCESSED, -1, code)


def soft_releaser_mechanism(
    *,
    gamma: float,
    noise_scale: float,
    threshold: float | int,
    max_unstable: int,
    noise: str = "seeded",
    distance: Callable[[torch.Tensor], torch.Tensor] = distance_to_instability,
) -> Mechanism:
    """``mechanism(scores (k, m), n, generator)`` → (n, m) output codes of the soft releaser.

    ``distance`` is the releaser's (DESIGN fact 2); tests pass BTT18 Alg 8's sensitivity-2
    :func:`~pate_stab.aggregation.votes.paper_distance_to_instability` to show it is flagged.
    """
    bins = num_bins(gamma)

    def mech(scores: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        s = torch.as_tensor(scores, dtype=torch.float64)
        ph, sh = gamma_histogram(s, gamma), shifted_gamma_histogram(s, gamma)
        m = ph.shape[0]
        tn, qn = releaser_noise(
            noise, noise_scale=noise_scale, threshold_shape=(n, 2 * max_unstable), query_shape=(n, 2 * m), generator=gen
        )
        status = soft_release_scan(
            distance(ph), distance(sh), qn, tn, threshold=threshold, max_failures=2 * max_unstable
        )
        return soft_output_codes(status, top_label(ph), top_label(sh), bins)

    return mech


def hard_releaser_mechanism(
    *, noise_scale: float, threshold: float | int, max_unstable: int, noise: str = "seeded"
) -> Mechanism:
    """``mechanism(counts (m, C), n, generator)`` → (n, m): 1 + released label, 0 for ⊥ or halted.

    BTT18 Alg 4 through :func:`~pate_stab.privacy.mechanisms.sparse_vector.above_threshold_scan`. Integer
    noise is compared as float64, which is exact for the integers involved (|x| < 2^53).
    """

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        c = torch.as_tensor(counts, dtype=torch.int64)
        m = c.shape[0]
        tn, qn = releaser_noise(
            noise, noise_scale=noise_scale, threshold_shape=(n, max_unstable), query_shape=(n, m), generator=gen
        )
        dist = distance_to_instability(c).to(torch.float64).expand(n, m)
        res = above_threshold_scan(
            dist, qn.to(torch.float64), tn.to(torch.float64), threshold=float(threshold), max_failures=max_unstable
        )
        labels = top_label(c).expand(n, m)
        return torch.where(res.outputs == PASSED, labels + 1, 0)

    return mech


def soft_vote_sets(distances: list[int], moves: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Neighbouring teacher scores (k, m) for γ = 1/4 in which one teacher (teacher 0) moves.

    In ``a`` query i has distance ``distances[i]`` on both the plain and the ½-shifted
    histogram: a top group at 0.55 (plain bin [0.5, 0.75), shifted bin [0.375, 0.625)) and a
    second group at 0.3 (bins [0.25, 0.5) and [0.125, 0.375)), gap 2(d + 1); spare teachers sit
    at 0.95 (the last plain bin, no shifted bin). In ``b`` teacher 0 switches group, so both
    distances move by ``moves[i]`` (±1) and the top bins — the released values — stay. With
    moves −1, …, −1, +1 this is the worst pattern of AboveThreshold (Lyu, Su & Li 2017): every
    passing query is harder to pass in ``b`` and the failing one harder to fail.
    """
    if len(distances) != len(moves) or not distances or any(v not in (-1, 1) for v in moves):
        raise ValueError("need one move (+1 or -1) per distance")
    cols_a, cols_b = [], []
    for d, move in zip(distances, moves, strict=True):
        gap, second = 2 * (check_int("distance", d, minimum=1) + 1), 5
        # teacher 0 is in the top group of a (move −1) or of b (move +1)
        top = second + gap - 1 if move < 0 else second + gap
        rest = [0.55] * top + [0.3] * (second if move < 0 else second - 1)
        cols_a.append([0.55 if move < 0 else 0.3] + rest)
        cols_b.append([0.3 if move < 0 else 0.55] + rest)
    k = max(len(c) for c in cols_a)
    pad = [[0.95] * (k - len(c)) for c in cols_a]
    a = torch.tensor([c + p for c, p in zip(cols_a, pad, strict=True)], dtype=torch.float64).T
    b = torch.tensor([c + p for c, p in zip(cols_b, pad, strict=True)], dtype=torch.float64).T
    return a, b


def hard_vote_sets(distances: list[int], moves: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Neighbouring vote histograms (m, 2): distance ``distances[i]`` in ``a``, moved by ``moves[i]`` in ``b``.

    One teacher changes its vote on every query, so each histogram moves one vote and the
    argmax (class 0) stays; see :func:`soft_vote_sets` for the pattern.
    """
    if len(distances) != len(moves) or not distances or any(v not in (-1, 1) for v in moves):
        raise ValueError("need one move (+1 or -1) per distance")
    second = 5
    rows_a, rows_b = [], []
    for d, move in zip(distances, moves, strict=True):
        top = second + 2 * (check_int("distance", d, minimum=1) + 1)  # gap 2(d + 1): distance d
        rows_a.append([top, second])
        rows_b.append([top - 1, second + 1] if move < 0 else [top + 1, second - 1])
    return torch.tensor(rows_a), torch.tensor(rows_b)


def releaser_cases() -> list[MechanismCase]:
    """The whole hard and soft releasers at real calibrations' certified (ε, δ), both noise modes.

    Pairs: one teacher moves on every query, four queries lose one unit of distance and the last
    gains one, at the threshold (the worst pattern of AboveThreshold); and a tie whose answer
    changes between neighbours (distance 0 on both soft histograms), covered by δ.
    """
    soft = calibrate(epsilon=4, delta=1e-5, num_queries=5, max_unstable=1, mode="tight", soft_labels=True)
    hard = calibrate(epsilon=2, delta=1e-5, num_queries=5, max_unstable=1, mode="tight")
    tie = calibrate(epsilon=1, delta=1e-5, num_queries=1, max_unstable=1, mode="tight", soft_labels=True)
    moves = [-1, -1, -1, -1, 1]
    one_teacher = "one teacher's output moves on every query"
    cases = []
    for noise in ("seeded", "secure"):
        w = secure_sparse_vector(soft).threshold if noise == "secure" else soft.threshold
        a, b = soft_vote_sets([round(w)] * 5, moves)
        mech = soft_releaser_mechanism(
            gamma=0.25, noise_scale=soft.noise_scale, threshold=w, max_unstable=1, noise=noise
        )
        cases.append(
            MechanismCase(
                f"soft releaser, {noise} (Alg 6/8, ε=4 tight, m=5, T=1)",
                mech,
                a,
                b,
                soft.certified_epsilon,
                soft.certified_delta,
                relation=one_teacher,
                sample_factor=0.5 if noise == "secure" else 1.0,
            )
        )
    w = secure_sparse_vector(tie).threshold
    a, b = dist_zero_soft_pair()
    cases.append(
        MechanismCase(
            "soft releaser, secure, tie that changes the answer (ε=1, m=1)",
            soft_releaser_mechanism(
                gamma=0.25, noise_scale=tie.noise_scale, threshold=w, max_unstable=1, noise="secure"
            ),
            a,
            b,
            tie.certified_epsilon,
            tie.certified_delta,
            relation=one_teacher,
            sample_factor=0.5,
        )
    )
    for noise in ("seeded", "secure"):
        w = secure_sparse_vector(hard).threshold if noise == "secure" else hard.threshold
        a, b = hard_vote_sets([round(w)] * 5, moves)
        mech = hard_releaser_mechanism(noise_scale=hard.noise_scale, threshold=w, max_unstable=1, noise=noise)
        cases.append(
            MechanismCase(
                f"hard releaser, {noise} (Alg 4, ε=2 tight, m=5, T=1)",
                mech,
                a,
                b,
                hard.certified_epsilon,
                hard.certified_delta,
                relation=one_teacher,
                sample_factor=0.5 if noise == "secure" else 1.0,
            )
        )
    return cases


def releaser_mutation_cases() -> list[MechanismCase]:
    """The secure soft releaser with BTT18 Alg 6's printed threshold w = λ log(4m/δ) (DESIGN fact 3).

    That threshold lets a distance-0 query through about √(δ/m) of the time, far above its share
    of δ: on the tie whose answer changes between neighbours the claimed (ε, δ) is refuted.
    """
    tie = calibrate(epsilon=1, delta=1e-5, num_queries=1, max_unstable=1, mode="tight", soft_labels=True)
    w = math.floor(paper_threshold(noise_scale=tie.noise_scale, delta=tie.delta, num_queries=1, soft_labels=True))
    a, b = dist_zero_soft_pair()
    mech = soft_releaser_mechanism(gamma=0.25, noise_scale=tie.noise_scale, threshold=w, max_unstable=1, noise="secure")
    return [
        MechanismCase(
            "soft releaser, secure, Alg 6's printed threshold λ log(4m/δ)",
            mech,
            a,
            b,
            tie.certified_epsilon,
            tie.certified_delta,
            relation="one teacher's output moves",
            sample_factor=0.5,
        )
    ]


def dist_zero_soft_pair() -> tuple[torch.Tensor, torch.Tensor]:
    """Ten teachers, γ = 1/4: a tie on both histograms in ``a``; in ``b`` one teacher moves and both top bins change."""
    a = torch.tensor([[0.3] * 5 + [0.6] * 5], dtype=torch.float64).T
    b = torch.tensor([[0.6] + [0.3] * 4 + [0.6] * 5], dtype=torch.float64).T
    return a, b

"""Which rows a round takes, given the selector's view of the candidates: per-class turns.

:func:`confident_per_class` orders a model's class probabilities (the ``"student-confidence"``
selection), :func:`spread_picks` the spread's shares (the ``"spread"`` selection); both take the
best of each predicted class in turn (:func:`per_class_order`), so a round does not collapse onto
the easiest class. Post-processing of public inputs and released outputs only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_tensor

__all__ = ["COVERAGE_CONFIDENCE", "SpreadPicks", "confident_per_class", "per_class_order", "spread_picks"]

COVERAGE_CONFIDENCE = 0.9  # "spread": least real-class share of a coverage pick


def confident_per_class(proba: Tensor, size: int) -> Tensor:
    """Positions of ``size`` rows of ``proba`` (n, C): the most confident of each predicted class in turn.

    Confidence is the top class probability. Classes take turns (class 0's most confident row,
    class 1's, …, then each class's second, …); a class with no rows left is skipped. Ties keep
    row order.
    """
    proba = check_tensor("proba", proba, ndim=2, floating=True, nonempty=False)
    confidence, guess = proba.max(1)
    return per_class_order(guess, confidence, size, num_classes=proba.shape[1])


def per_class_order(guess: Tensor, score: Tensor, size: int, *, num_classes: int) -> Tensor:
    """Positions of ``size`` rows: the highest ``score`` of each class of ``guess`` in turn.

    Classes take turns (class 0's best row, class 1's, …, then each class's second, …); a class
    with no rows left is skipped. Ties keep row order.
    """
    guess = check_tensor("guess", guess, ndim=1, floating=False, nonempty=False)
    score = check_tensor("score", score, ndim=1, floating=True, nonempty=False)
    if guess.shape != score.shape:
        raise ValueError(f"guess has {guess.numel()} rows, score {score.numel()}")
    size = min(check_int("size", size, minimum=0), guess.shape[0])
    queues = []
    for c in range(num_classes):
        rows = torch.nonzero(guess == c).flatten()
        queues.append(rows[score[rows].argsort(descending=True, stable=True)].tolist())
    picks: list[int] = []
    depth = 0
    while len(picks) < size:
        for queue in queues:
            if depth < len(queue) and len(picks) < size:
                picks.append(queue[depth])
        depth += 1
    return torch.tensor(picks, dtype=torch.int64)


@dataclass(frozen=True)
class SpreadPicks:
    """The rows a spread round takes, in order, and how many of them (the first) are coverage picks."""

    index: Tensor
    coverage: int


def spread_picks(real: Tensor, bottom: Tensor, mass: Tensor, size: int, *, coverage: float) -> SpreadPicks:
    """Rows to query given spread shares: real (n, C), bottom (n,) ⊥'s share, mass (n,).

    A row is eligible when its strongest class is a real class (not ⊥). First ``⌈coverage·size⌉``
    rows among the eligible with a real-class share ≥ :data:`COVERAGE_CONFIDENCE`, least mass
    first; then the eligible by real-class share; then, if the round is not full, the rest by
    real-class share minus ⊥'s. Each group is taken class by class (:func:`per_class_order`).
    """
    size = min(size, real.shape[0])
    num_classes = real.shape[1]
    confidence, guess = real.max(1)
    eligible = confidence > bottom
    picked = torch.zeros(real.shape[0], dtype=torch.bool)
    order: list[Tensor] = []

    def take(mask: Tensor, score: Tensor, count: int) -> int:
        rows = torch.nonzero(mask & ~picked).flatten()
        chosen = rows[per_class_order(guess[rows], score[rows], count, num_classes=num_classes)]
        picked[chosen] = True
        order.append(chosen)
        return int(chosen.numel())

    covered = take(eligible & (confidence >= COVERAGE_CONFIDENCE), -mass, math.ceil(coverage * size))
    taken = covered + take(eligible, confidence, size - covered)
    take(~eligible, confidence - bottom, size - taken)
    return SpreadPicks(torch.cat(order), covered)

"""Statistical differential-privacy tests: a lower bound on the privacy loss, from samples.

:func:`dp_test` runs a mechanism many times on two neighbouring inputs, chooses an output event
on a *selection* sample, then estimates the event's probability under both inputs on a fresh
*evaluation* sample and reports a Clopper–Pearson lower bound on

    ε_lb = log( (P[M(a) ∈ S] − δ) / P[M(b) ∈ S] ),

valid with probability at least 1 − α (α/2 on each of the two one-sided binomial bounds). If
ε_lb exceeds the claimed ε, the claim is refuted at level α: the mechanism (or its calibration)
is wrong. Selecting the event on a separate sample keeps the evaluation bound valid however
many candidate events were tried. This follows the event-ratio approach of Ding et al. 2018
("Detecting violations of differential privacy") with exact binomial intervals.

Mechanisms are vectorised over samples: ``mechanism(x, num_samples, generator)`` returns a
tensor whose first dimension is the sample. ``featurize`` maps that to a 1-D tensor: integer
codes for discrete outputs (events are single codes) or floats for continuous outputs (events
are half-lines ``{f > c}`` and ``{f <= c}`` at quantiles of the selection sample).
A :class:`MechanismCase` bundles what one call takes: the mechanism, a neighbouring pair, the
claim and the featurization.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from scipy import stats

from pate_stab._checks import (
    check_delta,
    check_generator,
    check_int,
    check_probability,
    check_real,
)

__all__ = ["Mechanism", "MechanismCase", "DPTestResult", "dp_test", "clopper_pearson", "encode_rows"]

Mechanism = Callable[[Any, int, torch.Generator], torch.Tensor]


@dataclass(frozen=True)
class MechanismCase:
    """One mechanism with its claim and a neighbouring pair (``relation`` says why they are neighbours)."""

    name: str
    mechanism: Mechanism
    input_a: Any
    input_b: Any
    epsilon: float
    delta: float = 0.0
    featurize: Callable[[torch.Tensor], torch.Tensor] | None = None
    relation: str = ""
    sample_factor: float = 1.0  # relative cost: slow samplers run fewer samples


@dataclass(frozen=True)
class DPTestResult:
    """Outcome of :func:`dp_test`.

    Attributes:
        epsilon_lower_bound: Clopper–Pearson lower bound on the privacy loss of the chosen event
            (−inf when the event gives no evidence).
        claimed_epsilon / claimed_delta: the claim that was tested.
        violates: ``epsilon_lower_bound > claimed_epsilon`` — the claim is refuted at level alpha.
        event: a description of the chosen event; ``direction`` says which input is the numerator.
        count_a / count_b: event counts in the evaluation sample (numerator, denominator input).
        num_samples: evaluation samples per input; alpha: the test level.
    """

    epsilon_lower_bound: float
    claimed_epsilon: float
    claimed_delta: float
    violates: bool
    event: str
    direction: str
    count_a: int
    count_b: int
    num_samples: int
    alpha: float


def clopper_pearson(count: int, n: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided (1 − alpha) binomial interval; each side has level alpha/2."""
    lo = 0.0 if count == 0 else float(stats.beta.ppf(alpha / 2, count, n - count + 1))
    hi = 1.0 if count == n else float(stats.beta.ppf(1 - alpha / 2, count + 1, n - count))
    return lo, hi


def encode_rows(outputs: torch.Tensor) -> torch.Tensor:
    """Encode each row of an integer tensor (samples × d) as one int64 code (mixed radix)."""
    if outputs.dim() == 1:
        return outputs.to(torch.int64)
    flat = outputs.reshape(outputs.shape[0], -1).to(torch.int64)
    low = int(flat.min())
    shifted = flat - low
    base = int(shifted.max()) + 1
    if base ** flat.shape[1] >= 2**62:
        raise ValueError("rows too long or values too large to encode as one int64 code")
    weights = base ** torch.arange(flat.shape[1] - 1, -1, -1, dtype=torch.int64)
    return (shifted * weights).sum(dim=1)


def _features(mechanism: Mechanism, x: Any, n: int, gen: torch.Generator, featurize: Callable | None) -> torch.Tensor:
    out = mechanism(x, n, gen)
    if not isinstance(out, torch.Tensor) or out.shape[0] != n:
        raise ValueError("mechanism must return a tensor whose first dimension is num_samples")
    if featurize is not None:
        out = featurize(out)
    elif out.dim() > 1:
        if out.is_floating_point():
            raise ValueError("multi-dimensional float outputs need a featurize function")
        out = encode_rows(out)
    if out.dim() != 1 or out.shape[0] != n:
        raise ValueError("featurize must return a 1-D tensor with one entry per sample")
    if out.is_floating_point() and not bool(torch.isfinite(out).all()):
        raise ValueError("mechanism produced NaN or infinite outputs")
    return out


def _equals(value: float, f: torch.Tensor) -> torch.Tensor:
    return f == value


def _above(cut: float, f: torch.Tensor) -> torch.Tensor:
    return f > cut


def _at_most(cut: float, f: torch.Tensor) -> torch.Tensor:
    return f <= cut


def _candidate_events(fa: torch.Tensor, fb: torch.Tensor) -> list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]]:
    events: list[tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = []
    if not fa.is_floating_point():
        values = torch.unique(torch.cat([fa, fb]))
        for v in values.tolist():
            events.append((f"output == {v}", partial(_equals, v)))
        return events
    pooled = torch.cat([fa, fb]).to(torch.float64)
    qs = torch.cat(
        [
            torch.tensor([1e-4, 3e-4, 1e-3, 3e-3], dtype=torch.float64),
            torch.linspace(0.01, 0.99, 99, dtype=torch.float64),
            torch.tensor([1 - 3e-3, 1 - 1e-3, 1 - 3e-4, 1 - 1e-4], dtype=torch.float64),
        ]
    )
    cuts = torch.unique(torch.quantile(pooled, qs))
    for c in cuts.tolist():
        events.append((f"output > {c:.6g}", partial(_above, c)))
        events.append((f"output <= {c:.6g}", partial(_at_most, c)))
    return events


def _loss_bound(count_num: int, count_den: int, n: int, delta: float, alpha: float) -> float:
    p_num_lo, _ = clopper_pearson(count_num, n, alpha)
    _, p_den_hi = clopper_pearson(count_den, n, alpha)
    if not p_num_lo - delta > 0:
        return -math.inf
    return math.log((p_num_lo - delta) / p_den_hi)


def dp_test(
    mechanism: Mechanism,
    input_a: Any,
    input_b: Any,
    *,
    epsilon: float,
    delta: float = 0.0,
    num_samples: int = 200_000,
    alpha: float = 1e-6,
    generator: torch.Generator,
    featurize: Callable[[torch.Tensor], torch.Tensor] | None = None,
    selection_samples: int | None = None,
) -> DPTestResult:
    """Test the claim "``mechanism`` is (epsilon, delta)-DP on the pair (input_a, input_b)".

    Args:
        mechanism: ``mechanism(x, num_samples, generator)`` → tensor, first dim = samples.
        input_a, input_b: neighbouring inputs (the caller states the relation).
        epsilon, delta: the claim.
        num_samples: evaluation runs per input.
        alpha: the false-refutation probability of a correct claim.
        generator: randomness for the mechanism runs.
        featurize: output tensor → 1-D features (default: identity / row codes).
        selection_samples: runs per input used to choose the event (default num_samples // 4).

    Returns:
        A :class:`DPTestResult`; ``violates`` is True when the claim is refuted at level alpha.
    """
    epsilon = check_real("epsilon", epsilon, low=0.0)
    delta = check_delta(delta, allow_zero=True)
    num_samples = check_int("num_samples", num_samples, minimum=100)
    alpha = check_probability("alpha", alpha, open_interval=True)
    check_generator(generator)
    n_sel = check_int("selection_samples", selection_samples or max(num_samples // 4, 100), minimum=100)

    sa = _features(mechanism, input_a, n_sel, generator, featurize)
    sb = _features(mechanism, input_b, n_sel, generator, featurize)
    best: tuple[float, str, str, Callable[[torch.Tensor], torch.Tensor]] | None = None
    for name, event in _candidate_events(sa, sb):
        ca, cb = int(event(sa).sum()), int(event(sb).sum())
        for direction, cn, cd in (("a/b", ca, cb), ("b/a", cb, ca)):
            # Score on the selection sample with a lenient level: prefers events with enough mass.
            score = _loss_bound(cn, cd, n_sel, delta, 0.05)
            if best is None or score > best[0]:
                best = (score, name, direction, event)
    if best is None:  # pragma: no cover - at least one candidate always exists
        raise RuntimeError("no candidate event")
    _, name, direction, event = best

    ea = _features(mechanism, input_a, num_samples, generator, featurize)
    eb = _features(mechanism, input_b, num_samples, generator, featurize)
    ca, cb = int(event(ea).sum()), int(event(eb).sum())
    cn, cd = (ca, cb) if direction == "a/b" else (cb, ca)
    bound = _loss_bound(cn, cd, num_samples, delta, alpha)
    return DPTestResult(
        epsilon_lower_bound=bound,
        claimed_epsilon=epsilon,
        claimed_delta=delta,
        violates=bound > epsilon,
        event=name,
        direction=direction,
        count_a=cn,
        count_b=cd,
        num_samples=num_samples,
        alpha=alpha,
    )

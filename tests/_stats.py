"""The test suite's false-failure rate, and assertions on DP test results that check it.

Statistical tests decide at level ``ALPHA``: a correct claim (or a correct sampler) fails its
test with probability at most ``ALPHA``. A :func:`~pate_stab.audit.harness.dp_test` result
records the level it ran at; the assertions below check that it is ``ALPHA`` and report the
claim, the bound and the event when the decision goes the wrong way.
"""

from __future__ import annotations

from pate_stab.audit.harness import DPTestResult

ALPHA = 1e-6
"""The one false-failure rate of the statistical tests (Clopper–Pearson, KS and binomial bounds)."""


def _describe(result: DPTestResult) -> str:
    return (
        f"claim (ε={result.claimed_epsilon:g}, δ={result.claimed_delta:g}); "
        f"lower bound ε_lb={result.epsilon_lower_bound:.4g} at α={result.alpha:g} "
        f"on the event {result.event!r} ({result.direction}), counts {result.count_a} vs {result.count_b} "
        f"of {result.num_samples} runs per input"
    )


def _check_level(result: DPTestResult) -> None:
    __tracebackhide__ = True
    if result.alpha != ALPHA:
        raise AssertionError(f"dp_test ran at α={result.alpha:g}, not the suite's α={ALPHA:g}: {_describe(result)}")


def assert_not_refuted(result: DPTestResult) -> None:
    """The claim stands: the lower bound on ε does not exceed it, at level ``ALPHA``."""
    __tracebackhide__ = True
    _check_level(result)
    if result.violates:
        raise AssertionError(f"a claim that should hold was refuted: {_describe(result)}")


def assert_refuted(result: DPTestResult) -> None:
    """The claim is refuted at level ``ALPHA``: the lower bound on ε exceeds it."""
    __tracebackhide__ = True
    _check_level(result)
    if not result.violates:
        raise AssertionError(f"a claim that should be refuted was not: {_describe(result)}")

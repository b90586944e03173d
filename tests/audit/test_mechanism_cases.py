"""Broken mechanisms that the statistical DP test must flag, beside their correct versions.

Mutations already covered elsewhere: sparse vector without query noise, without cutoff, with the
noisy value released (tests/privacy/mechanisms/test_sparse_vector.py); the paper's sensitivity-2 distance
with sensitivity-1 noise (tests/aggregation/test_releasers.py); LNMax/GNMax scales and
Confident-GNMax's noiseless check (tests/aggregation/test_baselines.py); output perturbation
with too little noise (tests/erm/test_output_perturbation.py). This file adds the remaining
variants of Lyu, Su & Li 2017 and of Ding et al. 2018, and runs every correct mechanism of the
package through the harness at its claimed ε (the table of :mod:`pate_stab.audit.mechanism_cases`).

Every dp_test here uses α = 1e-6: a correct claim is refuted with probability at most 1e-6.
"""

from __future__ import annotations

import pytest
import torch

from pate_stab.audit.harness import dp_test
from pate_stab.audit.mechanism_cases import audit_mechanisms, mechanism_cases, mutation_cases
from pate_stab.audit.mechanism_samplers import noisy_max, svt_query_scale
from tests._stats import ALPHA, assert_not_refuted

N = 200_000

pytestmark = pytest.mark.statistical


# --------------------------------------------------------------------------- broken variants


@pytest.mark.parametrize("case", mutation_cases(), ids=lambda c: c.name)
def test_mutation_is_flagged(case, record_property):
    (row,) = audit_mechanisms([case], num_samples=N, alpha=ALPHA, generator=torch.Generator().manual_seed(11))
    record_property("epsilon_lower_bound", row.epsilon_lower_bound)
    assert row.violates, row


# --------------------------------------------------------------------------- controls: the same pairs, correct


def test_sparse_vector_right_query_scale_is_not_flagged():
    """The wrong-scale pair with query noise Lap(2λ): not flagged, and the bound is near the claim."""
    (case,) = [c for c in mutation_cases() if c.name.startswith("sparse vector")]
    mech = svt_query_scale(1.0, 2.0)
    res = dp_test(
        mech,
        case.input_a,
        case.input_b,
        epsilon=2.0,
        num_samples=N,
        alpha=ALPHA,
        generator=torch.Generator().manual_seed(102),
    )
    assert_not_refuted(res)
    assert res.epsilon_lower_bound > 1.0, res  # the pair is close to the worst case


def test_noisy_max_returning_argmax_is_not_flagged():
    # one added record counted by query 0 only (counting queries move in one direction)
    res = dp_test(
        noisy_max(1.0, return_value=False),
        [1.0, 0.0, 0.0],
        [0.0, 0.0, 0.0],
        epsilon=1.0,
        num_samples=N,
        alpha=ALPHA,
        generator=torch.Generator().manual_seed(104),
    )
    assert_not_refuted(res)


# --------------------------------------------------------------------------- every correct mechanism


@pytest.mark.parametrize("case", mechanism_cases(), ids=lambda c: c.name)
def test_correct_mechanism_at_its_claim(case, record_property):
    (row,) = audit_mechanisms([case], num_samples=N, alpha=ALPHA, generator=torch.Generator().manual_seed(7))
    record_property("claimed_epsilon", row.claimed_epsilon)
    record_property("num_samples", row.num_samples)
    record_property("epsilon_lower_bound", row.epsilon_lower_bound)
    assert not row.violates, row
    assert row.epsilon_lower_bound > 0, row  # the harness sees the mechanism's loss, not nothing

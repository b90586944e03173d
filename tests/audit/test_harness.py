"""The DP test harness itself: it passes a correct Laplace mechanism and refutes wrong scales."""

import math

import pytest
import torch

from pate_stab.audit.harness import clopper_pearson, dp_test, encode_rows
from pate_stab.privacy.noise.seeded import laplace
from tests._stats import assert_not_refuted, assert_refuted

pytestmark = pytest.mark.statistical


def _laplace_mech(scale):
    def mech(x, n, gen):
        return x + laplace(scale, (n,), generator=gen)

    return mech


def test_clopper_pearson_brackets():
    lo, hi = clopper_pearson(50, 100, 0.05)
    assert 0.39 < lo < 0.41 and 0.59 < hi < 0.61  # textbook values 0.398, 0.602
    assert clopper_pearson(0, 10, 0.05)[0] == 0.0
    assert clopper_pearson(10, 10, 0.05)[1] == 1.0


def test_encode_rows_is_injective():
    rows = torch.tensor([[0, 1, -1], [1, 0, -1], [0, 1, 0], [0, 1, -1]])
    codes = encode_rows(rows)
    assert codes[0] == codes[3] and len(set(codes.tolist())) == 3


def test_correct_laplace_passes(generator):
    # Lap(1/ε) on a sensitivity-1 scalar is ε-DP; the lower bound must not exceed ε = 1.
    res = dp_test(_laplace_mech(1.0), 0.0, 1.0, epsilon=1.0, generator=generator)
    assert_not_refuted(res)
    assert res.epsilon_lower_bound > 0.8  # the harness finds most of the true loss


def test_wrong_scale_is_flagged(generator):
    # Scale ε instead of 1/ε (ε = 2 → scale 2 would be right for ε = 0.5; here claim ε = 0.5
    # with scale 1: true loss 1.0).
    res = dp_test(_laplace_mech(1.0), 0.0, 1.0, epsilon=0.5, generator=generator)
    assert_refuted(res)
    assert math.isfinite(res.epsilon_lower_bound)

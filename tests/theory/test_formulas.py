import math

import pytest

from pate_stab.privacy.mechanisms.calibration import calibrate, leak_probability
from pate_stab.theory import (
    corollary_max_unstable,
    paper_num_teachers,
    soft_label_num_teachers,
    teachers_for_unanimous_answer,
)


def test_paper_num_teachers_by_hand():
    expected = 136 * math.log(4 * 1000 * 10 / 1e-5) * math.sqrt(10 * math.log(2e5)) / 3
    assert paper_num_teachers(epsilon=3, delta=1e-5, num_queries=1000, max_unstable=10, beta=0.05) == pytest.approx(
        expected
    )
    assert expected == pytest.approx(11073.5, abs=1)
    soft = 136 * math.log(8 * 1000 * 10 / 1e-5) * math.sqrt(2 * 10 * math.log(2e5)) / 3
    assert soft_label_num_teachers(
        epsilon=3, delta=1e-5, num_queries=1000, max_unstable=10, beta=0.05
    ) == pytest.approx(soft)


def test_corollary_t_by_hand():
    assert corollary_max_unstable(num_queries=1000, alpha=0.01, beta=0.05) == math.ceil(
        3 * (10 + math.sqrt(1000 * math.log(1000 / 0.05) / 2))
    )
    assert corollary_max_unstable(num_queries=1000, alpha=0.01, beta=0.05) == 242


def test_teachers_for_unanimous_answer_is_minimal():
    cal = calibrate(epsilon=3, delta=1e-5, num_queries=1000, max_unstable=10, mode="tight")
    k = teachers_for_unanimous_answer(cal, fail_probability=0.05)

    def fail(kk):
        # fails when Lap(2λ) − Lap(λ) <= w − dist, i.e. (by symmetry) with the leak law at dist − w
        dist = max(0, math.ceil(kk / 2) - 1)
        if dist < cal.threshold:
            return 1.0
        return leak_probability(threshold=dist - cal.threshold, noise_scale=cal.noise_scale)

    assert fail(k) <= 0.05 < fail(k - 2)
    assert 500 < k < 700  # DESIGN.md: about 590 at ε = 3, T = 10 (tight)

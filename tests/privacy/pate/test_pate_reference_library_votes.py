"""PATE's data-dependent analysis on votes of the library's own teachers, against tensorflow/privacy.

The histograms are the first 60 queries of a k = 250 synthetic run's teachers (3 classes), written by
``pate-stab transfer --num-teachers 250 --num-queries 100 --teacher-epochs 5 --set num_private=6000
--set num_public=400 --set num_eval=300 --set separation=2.5 --set teacher_lr=0.05 --export-votes``.
The reference values come from tensorflow/privacy ``research/pate_2018/core.py`` (commit
03035d5d4a271ac795dab80f5bc1cef82fc3d462): ``compute_logpr_answered`` / ``compute_rdp_threshold``
on every query, ``compute_logq_gaussian`` / ``rdp_gaussian`` on the answered ones, summed, then
``compute_eps_from_delta``; with the ICLR 2018 MNIST (T = 200, σ1 = 150, σ2 = 40, δ = 1e-5) and SVHN
(T = 300, σ1 = 200, σ2 = 40, δ = 1e-6) settings. The ⊥ pattern is fixed (largest count ≥ T).
"""

from __future__ import annotations

import numpy as np
import pytest

from pate_stab.privacy.pate import data_dependent as pate_analysis
from pate_stab.privacy.pate import rdp as pate_rdp

COUNTS = np.array(
    [
        [105, 105, 40],
        [234, 0, 16],
        [234, 2, 14],
        [2, 247, 1],
        [222, 12, 16],
        [5, 58, 187],
        [215, 4, 31],
        [62, 5, 183],
        [33, 180, 37],
        [0, 216, 34],
        [154, 12, 84],
        [134, 20, 96],
        [216, 13, 21],
        [15, 208, 27],
        [231, 14, 5],
        [113, 21, 116],
        [238, 8, 4],
        [7, 19, 224],
        [220, 26, 4],
        [35, 208, 7],
        [90, 19, 141],
        [178, 67, 5],
        [123, 54, 73],
        [220, 30, 0],
        [19, 86, 145],
        [75, 148, 27],
        [5, 230, 15],
        [92, 144, 14],
        [43, 53, 154],
        [41, 135, 74],
        [194, 47, 9],
        [33, 53, 164],
        [29, 117, 104],
        [19, 0, 231],
        [48, 72, 130],
        [3, 191, 56],
        [19, 23, 208],
        [121, 17, 112],
        [168, 32, 50],
        [11, 32, 207],
        [225, 20, 5],
        [20, 148, 82],
        [88, 23, 139],
        [85, 47, 118],
        [36, 17, 197],
        [16, 2, 232],
        [12, 4, 234],
        [44, 137, 69],
        [21, 229, 0],
        [171, 9, 70],
        [58, 192, 0],
        [36, 200, 14],
        [104, 139, 7],
        [201, 44, 5],
        [67, 64, 119],
        [31, 210, 9],
        [14, 2, 234],
        [68, 22, 160],
        [52, 4, 194],
        [96, 88, 66],
    ],
    dtype=np.int64,
)

# (T, σ1, σ2, δ, Confident-GNMax ε, GNMax-with-σ2-on-every-query ε) from the reference
SETTINGS = {
    "mnist": (200.0, 150.0, 40.0, 1e-5, 0.4129662802978791, 0.9308615657055324),
    "svhn": (300.0, 200.0, 40.0, 1e-6, 0.20433578665398064, 1.021935896827015),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_library_votes_agree_with_reference(name):
    threshold, sigma1, sigma2, delta, eps_cgnmax, eps_gnmax = SETTINGS[name]
    orders = pate_rdp.DEFAULT_ORDERS
    answered = COUNTS.max(axis=1) >= threshold
    rdp = pate_analysis.confident_gnmax_data_dependent_rdp(
        counts=COUNTS, answered=answered, threshold=threshold, sigma1=sigma1, sigma2=sigma2, orders=orders
    )
    assert pate_rdp.rdp_to_epsilon(rdp=rdp, orders=orders, delta=delta)[0] == pytest.approx(eps_cgnmax, rel=1e-6)
    rdp = pate_analysis.gnmax_data_dependent_rdp(counts=COUNTS, sigma=sigma2, orders=orders)
    assert pate_rdp.rdp_to_epsilon(rdp=rdp, orders=orders, delta=delta)[0] == pytest.approx(eps_gnmax, rel=1e-6)

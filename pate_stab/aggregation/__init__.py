"""Votes → labels: vote histograms, the stability releasers, PATE's aggregators, comparisons.

Example::

    counts = vote_histogram(teacher_predictions, num_classes=10)          # (m, C)
    cal = calibrate(epsilon=8, delta=1e-5, num_queries=m, max_unstable=10, mode="tight")
    labels = StabilityReleaser(cal).release(counts).labels  # −1 for ⊥; exact noise from the OS
"""

from pate_stab.aggregation.base import ABSTAIN, ReleaseResult
from pate_stab.aggregation.baseline_releaser import BaselineReleaser
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.label_table import TABLE_AGGREGATORS, AggregatorRow, compare_aggregators, format_table
from pate_stab.aggregation.registry import AGGREGATORS, AggregatorSettings, AggregatorSpec, Releaser, make_releaser
from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.aggregation.soft_labels import SoftLabelReleaser
from pate_stab.aggregation.votes import (
    bin_midpoints,
    distance_to_instability,
    gamma_histogram,
    num_bins,
    paper_distance_to_instability,
    shifted_bin_values,
    shifted_gamma_histogram,
    top_label,
    vote_gap,
    vote_histogram,
)

__all__ = [
    "ABSTAIN",
    "AGGREGATORS",
    "AggregatorRow",
    "AggregatorSettings",
    "AggregatorSpec",
    "BaselineReleaser",
    "Releaser",
    "TABLE_AGGREGATORS",
    "ConfidentGNMax",
    "GNMax",
    "LNMax",
    "ReleaseResult",
    "SoftLabelReleaser",
    "StabilityReleaser",
    "bin_midpoints",
    "compare_aggregators",
    "make_releaser",
    "distance_to_instability",
    "format_table",
    "gamma_histogram",
    "num_bins",
    "paper_distance_to_instability",
    "shifted_bin_values",
    "shifted_gamma_histogram",
    "top_label",
    "vote_gap",
    "vote_histogram",
]

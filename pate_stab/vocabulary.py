"""The choices and fixed defaults that the run's configuration shares with the pipeline's parts below it.

A vocabulary is written once, as a ``Literal`` type, and its values are ``typing.get_args`` of it. The ones
here are read both by :mod:`pate_stab.run.config` (which checks a recipe's settings against them) and by a
part of the pipeline that the import order places below the configuration (the student's ⊥ policy, the
query selection): neither may import the other (DESIGN.md, "Layout (target)": the configuration imports no
algorithm, an algorithm does not import the pipeline), so both import this module, which imports nothing of
the package. Every other vocabulary of the configuration is in :mod:`pate_stab.run.config.names`.

The privacy relation's words (the neighbouring relation, the privacy unit), the noise source, the
stability calibration and the votes file's layouts are here too: the privacy core, the configuration,
the data readers and the command line's parser all state them, and the parser imports nothing heavy
(``pate-stab --help`` loads no torch), so its choices are ``get_args`` of these types.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

__all__ = [
    "BOTTOM_POLICIES",
    "CALIBRATIONS",
    "LAYOUTS",
    "NEIGHBOURING_RELATIONS",
    "NOISE_MODES",
    "PRIVACY_UNITS",
    "GRAPH_ALPHA",
    "GRAPH_NEIGHBORS",
    "GRAPH_PCA_DIM",
    "GRAPH_POWER",
    "GRAPH_STEPS",
    "QUERY_SELECTIONS",
    "REPRESENTATIVE_CHOICES",
    "SELECTION_COVERAGE",
    "SELECTION_REPRESENTATIVES",
    "SELECTION_ROUND_SIZE",
    "BottomPolicy",
    "Calibration",
    "Layout",
    "Neighbouring",
    "NoiseMode",
    "PrivacyUnit",
    "QuerySelection",
    "SelectionRepresentatives",
    "check_query_selection",
    "check_representatives",
]

Neighbouring = Literal["add_remove", "replace_one"]
"""The neighbouring relation a guarantee is stated for (DESIGN.md fact 1; :mod:`pate_stab.privacy.ledger.format`)."""
NEIGHBOURING_RELATIONS: tuple[str, ...] = get_args(Neighbouring)
PrivacyUnit = Literal["record", "label"]
"""What a neighbouring data set changes (DESIGN.md fact 13): ``"record"``, one record's inputs and
label (added, removed or replaced, by the relation); ``"label"``, one record's label only, its
inputs being public (label differential privacy, Chaudhuri & Hsu 2011; Ghazi et al. 2021). A label
change replaces one record by another with the same inputs, so a label ledger's relation is
replace-one. A record guarantee implies a label guarantee (replace-one: the same (ε, δ); add/remove:
by group privacy, :func:`pate_stab.privacy.ledger.format.replace_one_cost`); a label guarantee implies no
record guarantee."""
PRIVACY_UNITS: tuple[str, ...] = get_args(PrivacyUnit)
NoiseMode = Literal["secure", "seeded"]
"""Where a release's noise comes from: ``"secure"`` (default: exact discrete samplers fed by the
OS's CSPRNG) or ``"seeded"`` (reproducible research only)."""
NOISE_MODES: tuple[str, ...] = get_args(NoiseMode)
Calibration = Literal["paper", "tight"]
"""The stability releasers' calibration (:func:`pate_stab.privacy.mechanisms.calibration.calibrate`)."""
CALIBRATIONS: tuple[str, ...] = get_args(Calibration)
Layout = Literal["predictions", "counts", "scores"]
"""A votes file's layout (:mod:`pate_stab.data.votes_file`)."""
LAYOUTS: tuple[str, ...] = get_args(Layout)

BottomPolicy = Literal["drop", "random"]
"""What the student does with ⊥ (:mod:`pate_stab.student.targets`): drop those queries, or replace each by a
uniformly random label (BTT18 §4.2); both are post-processing of the release."""
BOTTOM_POLICIES: tuple[str, ...] = get_args(BottomPolicy)

QuerySelection = Literal["first", "student-confidence", "spread"]
"""Which public inputs are queried, in which order (:mod:`pate_stab.selection`)."""
QUERY_SELECTIONS: tuple[str, ...] = get_args(QuerySelection)
SelectionRepresentatives = Literal["centroid", "dense"]
"""Which point stands for a k-means cluster in round 0 and class discovery: the member nearest the centroid,
or the cluster's densest member (:func:`pate_stab.selection.dense_representatives`)."""
REPRESENTATIVE_CHOICES: tuple[str, ...] = get_args(SelectionRepresentatives)

# The spread selection's defaults, the main job's (pate_stab.run.config.sections.GraphSettings and
# SelectionSettings) and ``release --votes``' (pate_stab.selection.spread.SPREAD_DEFAULTS). The graph's are fixed in
# advance from Iscen, Tolias, Avrithis & Chum (2019), "Label propagation for deep semi-supervised learning" (CVPR;
# the affinity max(cos, 0)^γ is theirs), as their public code (LP-DeepSSL, update_plabels) runs it: k = 50
# neighbours, γ = 3, α = 0.99 (also Zhou et al. 2004's α), 20 terms of the series, the graph on the features as
# they are (no extra PCA). No label of the pool or the evaluation split chose them, nor the round size and coverage.
GRAPH_NEIGHBORS = 50  # kNN graph degree
GRAPH_POWER = 3.0  # affinity exponent γ in max(cos, 0)^γ
GRAPH_ALPHA = 0.99  # propagation weight α in [0, 1)
GRAPH_STEPS = 20  # terms of the series Σ (αS)^t
GRAPH_PCA_DIM: int | None = None  # public PCA of the features before the graph (None: none)
SELECTION_ROUND_SIZE = 20  # the first round's size and the smallest round
SELECTION_COVERAGE = 0.1  # share of each round for confident, not yet covered points
SELECTION_REPRESENTATIVES: SelectionRepresentatives = "centroid"


def check_query_selection(name: Any) -> str:
    """Raises ValueError unless ``name`` is one of :data:`QUERY_SELECTIONS`."""
    if not isinstance(name, str) or name not in QUERY_SELECTIONS:
        raise ValueError(f"query_selection must be one of {', '.join(QUERY_SELECTIONS)}, got {name!r}")
    return name


def check_representatives(name: Any) -> str:
    """Raises ValueError unless ``name`` is one of :data:`REPRESENTATIVE_CHOICES`."""
    if not isinstance(name, str) or name not in REPRESENTATIVE_CHOICES:
        raise ValueError(f"selection_representatives must be one of {', '.join(REPRESENTATIVE_CHOICES)}, got {name!r}")
    return name

"""Tabular data sets read from a path: UCI Adult, MAGIC gamma, KDD-99 (10 %), IWPC warfarin.

Every encoding is fixed by public information before a row is read (DESIGN.md fact 6), so one
record never changes the width, the column order, another record's encoding or a split's size:

* Adult: the :class:`~pate_stab.data.schema.TabularSchema` shipped as ``schemas/adult.json``,
  built from the published ``adult.names`` by :func:`adult_schema_from_names` (a test checks that
  the two agree): the 14 attributes in the file's order, each categorical one with its published
  categories plus an ``<other>`` slot (the missing value "?"), the six numeric ones scaled from
  the a-priori bounds :data:`~pate_stab.data.bounds.ADULT_NUMERIC_BOUNDS` to [0, 1] (clipped):
  113 columns. The shipped file makes ``adult.names`` unnecessary at load time; the parser shows
  where every entry comes from. Label 1 = income > 50K. The official split is by file
  (``part="train"``: ``adult.data``, ``part="test"``: ``adult.test``).
* MAGIC (Chaudhuri & Vinterbo 2013, Section 5): the ten columns of ``magic04.names`` scaled from
  :data:`~pate_stab.data.bounds.MAGIC_BOUNDS` to [0, 1] (clipped). Label 1 = gamma (signal).
* KDD-99 (Ligett et al. 2017, Appendix B.1): log(1 + x) on duration, src_bytes and dst_bytes,
  the three text columns (protocol_type, service, flag) dropped (38 features) or one-hot encoded
  over category lists the caller states (``categories=``; values not listed go to ``<other>``),
  rows projected into the unit ℓ1 ball. Label 1 = any attack, 0 = "normal.".
* IWPC warfarin (Wu et al. 2016, Section 6, after the IWPC 2009 model): age in decades, height,
  weight scaled from the public ranges of :func:`load_warfarin_iwpc` to [0, 1] (clipped; a
  missing value gets the range's midpoint 0.5, fixed a priori), race (the IWPC data's White /
  Asian / Black or African American / Unknown), VKORC1 rs9923231 genotype (A/A, A/G, G/G),
  CYP2C9 genotype (*1/*1 … *3/*3), each with an ``<other>`` slot, enzyme-inducer status,
  amiodarone; real target = therapeutic dose (mg/week). :func:`load_warfarin_iwpc` is the
  encoding of the IWPC dosing model used by the ERM reproductions (Wu et al. 2016, Ligett et
  al. 2017): complete rows only, age / height / weight / dose mapped with public ranges passed
  as arguments (:mod:`pate_stab.data.bounds`), rows in the unit ball.

``norm="l2"`` / ``"l1"`` projects each row into the unit ball, x ↦ x / max(1, ‖x‖): a map of
each row on its own, no statistic of the data set. ``standardize=True`` (z-scores with the mean
and standard deviation of the whole loaded file, as the papers do) and KDD-99's
``categories="from_data"`` read statistics of every row, private ones included: they are
opt-outs and raise :class:`~pate_stab._checks.PrivacyLeakWarning`. For a private pipeline
standardise with statistics of public data (:func:`standardize`).

Labels: ``label_format="01"`` gives int64 {0, 1}; ``"pm1"`` gives float32 {−1, +1}.

The shared return type and row maps are :mod:`pate_stab.data.tabular_data`; Adult, MAGIC and
KDD-99 are :mod:`pate_stab.data.uci`; IWPC warfarin is :mod:`pate_stab.data.warfarin`. Their
public names, and the schema's, are re-exported here.
"""

from pate_stab.data.table_encoding import EncodedTable, encode_table
from pate_stab.data.table_schema import OTHER, Column, SchemaError, TabularSchema
from pate_stab.data.tabular_data import TabularData, project_to_unit_ball, standardize
from pate_stab.data.uci import (
    ADULT_FIELDS,
    KDD_TEXT_COLUMNS,
    adult_schema,
    adult_schema_from_names,
    load_adult,
    load_kddcup99,
    load_magic,
    magic_schema,
)
from pate_stab.data.warfarin import WARFARIN_IWPC_FEATURES, load_warfarin, load_warfarin_iwpc

__all__ = [
    "ADULT_FIELDS",
    "KDD_TEXT_COLUMNS",
    "OTHER",
    "Column",
    "EncodedTable",
    "SchemaError",
    "TabularData",
    "TabularSchema",
    "WARFARIN_IWPC_FEATURES",
    "adult_schema",
    "adult_schema_from_names",
    "encode_table",
    "load_adult",
    "load_kddcup99",
    "load_magic",
    "load_warfarin",
    "load_warfarin_iwpc",
    "magic_schema",
    "project_to_unit_ball",
    "standardize",
]

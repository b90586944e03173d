"""Tabular encodings fixed by public information: a schema, and tables encoded with it.

DESIGN.md fact 6: categorical vocabularies, numeric bounds, column order and the encoded width
are never read from private rows. A :class:`TabularSchema` states them in advance — from a data
set's published description (e.g. UCI's ``adult.names``), from a public split, or chosen a priori
— and :func:`encode_table` maps each row on its own (numeric columns scaled from public bounds to
[0, 1], categorical ones to indicators over fixed categories plus an ``<other>`` slot). So the
encoded width (:attr:`TabularSchema.num_features`) and every row's encoding depend on the schema
and that row alone: adding, removing or changing another record changes neither.

Two questions, two modules, both re-exported here:

* what a schema states, how it is checked, and how it is written (JSON / YAML schema files, UCI
  ``.names``): :mod:`pate_stab.data.table_schema`;
* how a table (a CSV file or rows) is read and encoded with it: :mod:`pate_stab.data.table_encoding`.

Errors in a schema or in a table that does not fit it raise :class:`SchemaError` (a ``ValueError``)
naming the file, the row and the column.
"""

from pate_stab.data.table_encoding import EncodedTable, encode_categorical, encode_table
from pate_stab.data.table_schema import OTHER, Column, SchemaError, TabularSchema, schema_from_uci_names
from pate_stab.data.table_schema import UCI_COMMENT as UCI_COMMENT

__all__ = [
    "OTHER",
    "Column",
    "EncodedTable",
    "SchemaError",
    "TabularSchema",
    "encode_categorical",
    "encode_table",
    "schema_from_uci_names",
]

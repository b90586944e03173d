"""A tabular schema: the public facts that fix an encoding, and where they come from.

DESIGN.md fact 6: categorical vocabularies, numeric bounds, column order and the encoded width
are never read from private rows. A :class:`TabularSchema` states them in advance — from a data
set's published description (:func:`schema_from_uci_names`, e.g. UCI's ``adult.names``), from a
public split, or chosen a priori — and :func:`pate_stab.data.table_encoding.encode_table`
encodes a table with it. Its encoded width (:attr:`TabularSchema.num_features`) depends on the
schema alone.

A file without a header row takes its field names from ``columns=`` or, with ``header: false``,
from the schema's ``order`` (every column's name, label and id included, in file order); lines
starting with the schema's ``comment`` prefix are skipped (UCI's files: ``|``). A class may be
written several ways: ``label_aliases``, or in a schema file a class given as a list of spellings
(the first names it).

A schema file (JSON, or YAML with ``.yaml`` / ``.yml``) looks like::

    {"columns": [{"name": "age", "kind": "numeric", "bounds": [17, 90]},
                 {"name": "sex", "kind": "categorical", "categories": ["Female", "Male"]}],
     "label": "income", "classes": ["<=50K", ">50K"], "id_column": null,
     "label_aliases": {"<=50K.": "<=50K", ">50K.": ">50K"}, "source": "UCI adult.names",
     "header": true, "order": null, "comment": null}

(``"classes": [["<=50K", "<=50K."], [">50K", ">50K."]]`` says the same as those classes and aliases.)
A schema that cannot be used raises :class:`SchemaError` (a ``ValueError``) naming the file and
the column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast

__all__ = ["OTHER", "UCI_COMMENT", "Column", "SchemaError", "TabularSchema", "schema_from_uci_names"]

OTHER = "<other>"
"""Name of the extra indicator slot of every categorical column (values not in its list)."""

UCI_COMMENT = "|"
"""UCI's comment prefix (the first line of ``adult.test``)."""


class SchemaError(ValueError):
    """A schema that cannot be used, or a table that does not fit its schema (names the file, row and column)."""


@dataclass(frozen=True)
class Column:
    """One input column: ``numeric`` with public ``bounds`` or ``categorical`` with fixed ``categories``.

    ``fallback`` (categorical only, optional): a declared category that a value outside
    ``categories`` may be mapped to when new rows are encoded for prediction, on request
    (``unknown_categories="fallback"``; ``pate-stab predict --unknown-category fallback``). The
    private set and the pool never use it: a value outside the categories is refused there.
    """

    name: str
    kind: Literal["numeric", "categorical"]
    bounds: tuple[float, float] | None = None
    categories: tuple[str, ...] = ()
    fallback: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError(f"column name must be a non-empty string, got {self.name!r}")
        if self.kind == "numeric":
            if self.bounds is None or len(self.bounds) != 2:
                raise SchemaError(f"numeric column {self.name!r} needs public bounds (lo, hi)")
            lo, hi = (float(b) for b in self.bounds)
            if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                raise SchemaError(f"column {self.name!r}: bounds must be finite with hi > lo, got {self.bounds!r}")
            if self.categories or self.fallback is not None:
                raise SchemaError(f"numeric column {self.name!r} takes no categories and no fallback")
            object.__setattr__(self, "bounds", (lo, hi))
        elif self.kind == "categorical":
            cats = tuple(str(c) for c in self.categories)
            if not cats or len(set(cats)) != len(cats) or OTHER in cats:
                raise SchemaError(
                    f"categorical column {self.name!r} needs a non-empty list of distinct categories "
                    f"(not {OTHER!r}), got {list(self.categories)!r}"
                )
            if self.bounds is not None:
                raise SchemaError(f"categorical column {self.name!r} takes no bounds")
            object.__setattr__(self, "categories", cats)
            if self.fallback is not None:
                fallback = str(self.fallback)
                if fallback not in cats:
                    raise SchemaError(
                        f"categorical column {self.name!r}: fallback {fallback!r} is not one of its categories "
                        f"{list(cats)}"
                    )
                object.__setattr__(self, "fallback", fallback)
        else:
            raise SchemaError(f"column {self.name!r}: kind must be 'numeric' or 'categorical', got {self.kind!r}")

    @property
    def width(self) -> int:
        return 1 if self.kind == "numeric" else len(self.categories) + 1

    @property
    def feature_names(self) -> list[str]:
        if self.kind == "numeric":
            return [self.name]
        return [f"{self.name}={c}" for c in (*self.categories, OTHER)]


@dataclass(frozen=True)
class TabularSchema:
    """Ordered input columns, the label and its classes, and an optional record-id column.

    Everything here is public and fixed before any private row is read;
    :func:`~pate_stab.data.table_encoding.encode_table` encodes a table with it.

    Args:
        columns: the input columns, in the order of the encoded features.
        label: the label column's name (None: the tables carry no label).
        classes: the label's classes; class i is encoded as i.
        id_column: a column of integer record ids (kept by neighbouring data sets), or None.
        label_aliases: other spellings of a class (``adult.test`` writes ``">50K."``).
        source: where the schema comes from (documentation only).
        header: whether files encoded with it start with a header row.
        order: the field names of a file without a header row (every column, the label and the id
            column included), in file order; needed with ``header=False``.
        comment: lines starting with this prefix are skipped (None: none are).
        unlisted: what a user's file (:mod:`pate_stab.data.own`, ``predict``) does with a categorical
            value outside its column's categories: ``"refuse"`` (default: the run stops, naming the
            file, row, column and value) or ``"other"`` (declared: such values take the column's
            ``<other>`` slot, e.g. UCI Adult's missing value "?").
    """

    columns: tuple[Column, ...]
    label: str | None = None
    classes: tuple[str, ...] = ()
    id_column: str | None = None
    label_aliases: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    header: bool = True
    order: tuple[str, ...] | None = None
    comment: str | None = None
    unlisted: Literal["refuse", "other"] = "refuse"

    def __post_init__(self) -> None:
        cols = tuple(c if isinstance(c, Column) else Column(**c) for c in self.columns)
        if not cols:
            raise SchemaError("a schema needs at least one input column")
        names = [c.name for c in cols] + [n for n in (self.label, self.id_column) if n is not None]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise SchemaError(f"column names must be distinct (inputs, label, id column); repeated: {repeated}")
        classes = tuple(str(c) for c in self.classes)
        if self.label is not None and (len(classes) < 2 or len(set(classes)) != len(classes)):
            raise SchemaError(f"label {self.label!r} needs at least two distinct classes, got {list(self.classes)!r}")
        if self.label is None and classes:
            raise SchemaError("classes given without a label column")
        aliases = {str(k): str(v) for k, v in dict(self.label_aliases).items()}
        unknown = sorted(v for v in aliases.values() if v not in classes)
        if unknown:
            raise SchemaError(f"label_aliases map to values that are not classes: {unknown}")
        clash = sorted(a for a, c in aliases.items() if a in classes and a != c)
        if clash:
            raise SchemaError(f"label_aliases spell classes as other classes: {clash}")
        order = None if self.order is None else tuple(str(n) for n in self.order)
        if not self.header and (order is None or sorted(order) != sorted(names)):
            raise SchemaError(
                f"a schema with header: false needs 'order', every column's name in file order (columns: {names})"
            )
        if order is not None and self.header:
            raise SchemaError("'order' is for files without a header row (header: false)")
        if self.unlisted not in ("refuse", "other"):
            raise SchemaError(f"unlisted must be 'refuse' or 'other', got {self.unlisted!r}")
        if self.comment is not None and (not isinstance(self.comment, str) or not self.comment):
            raise SchemaError(f"comment must be a non-empty prefix or None, got {self.comment!r}")
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "label_aliases", aliases)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "header", bool(self.header))

    @property
    def num_features(self) -> int:
        """The encoded width: 1 per numeric column, categories + 1 per categorical one (no data needed)."""
        return sum(c.width for c in self.columns)

    @property
    def feature_names(self) -> list[str]:
        return [n for c in self.columns for n in c.feature_names]

    def to_dict(self) -> dict[str, Any]:
        columns: list[dict[str, Any]] = []
        for c in self.columns:
            if c.kind == "numeric":
                columns.append({"name": c.name, "kind": c.kind, "bounds": list(cast(tuple, c.bounds))})
            else:
                columns.append({"name": c.name, "kind": c.kind, "categories": list(c.categories)})
                if c.fallback is not None:  # written only when declared: older schemas read as they were
                    columns[-1]["fallback"] = c.fallback
        return {
            "columns": columns,
            "label": self.label,
            "classes": list(self.classes),
            "id_column": self.id_column,
            "label_aliases": dict(self.label_aliases),
            "source": self.source,
            "header": self.header,
            "order": None if self.order is None else list(self.order),
            "comment": self.comment,
        } | ({"unlisted": self.unlisted} if self.unlisted != "refuse" else {})

    def with_fallbacks(self, fallbacks: Mapping[str, str]) -> TabularSchema:
        """This schema with ``fallbacks`` (column → one of its declared categories) as its columns'
        fallback categories (used by prediction's ``unknown_categories="fallback"`` only; the
        encoding and its width are unchanged)."""
        if not fallbacks:
            return self
        by_name = {c.name: c for c in self.columns}
        for name in fallbacks:
            if name not in by_name or by_name[name].kind != "categorical":
                categorical = [c.name for c in self.columns if c.kind == "categorical"]
                raise SchemaError(f"fallback for {name!r}: not a categorical column of the schema ({categorical})")
        columns = tuple(replace(c, fallback=str(fallbacks[c.name])) if c.name in fallbacks else c for c in self.columns)
        return replace(self, columns=columns)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TabularSchema:
        known = {"columns", "label", "classes", "id_column", "label_aliases", "source", "header", "order", "comment",
                 "unlisted"}  # fmt: skip
        unknown = sorted(set(data) - known)
        if unknown:
            raise SchemaError(f"unknown schema keys: {unknown} (known: {sorted(known)})")
        if not isinstance(data.get("columns"), list):
            raise SchemaError("a schema needs 'columns', a list of {name, kind, bounds | categories}")
        columns = []
        for j, c in enumerate(data["columns"]):
            if not isinstance(c, Mapping) or set(c) - {"name", "kind", "bounds", "categories", "fallback"}:
                raise SchemaError(
                    f"schema column {j}: expected keys name, kind, bounds | categories (and fallback), got {c!r}"
                )
            bounds = c.get("bounds")
            columns.append(
                Column(
                    name=c.get("name", ""),
                    kind=c.get("kind", ""),
                    bounds=None if bounds is None else tuple(bounds),
                    categories=tuple(c.get("categories", ())),
                    fallback=c.get("fallback"),
                )
            )
        # a class given as a list of spellings: the first names it, the others are its aliases
        classes: list[str] = []
        aliases = {str(k): str(v) for k, v in dict(data.get("label_aliases") or {}).items()}
        for c in data.get("classes") or ():
            spellings = [str(v) for v in c] if isinstance(c, list | tuple) else [str(c)]
            if not spellings:
                raise SchemaError(f"label {data.get('label')!r}: a class needs at least one spelling")
            classes.append(spellings[0])
            for other in spellings[1:]:
                if aliases.get(other, spellings[0]) != spellings[0]:
                    raise SchemaError(f"label spelling {other!r} is given for two classes")
                aliases[other] = spellings[0]
        order = data.get("order")
        header = data.get("header", True)
        if not isinstance(header, bool):
            raise SchemaError(f"header must be true or false, got {header!r}")
        return cls(
            columns=tuple(columns),
            label=data.get("label"),
            classes=tuple(classes),
            id_column=data.get("id_column"),
            label_aliases=aliases,
            source=str(data.get("source", "")),
            header=header,
            order=None if order is None else tuple(order),
            comment=data.get("comment"),
            unlisted=data.get("unlisted", "refuse"),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> TabularSchema:
        """Read a schema from JSON (``.json``) or YAML (``.yaml`` / ``.yml``)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"schema file {path} does not exist")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise SchemaError(
                f"schema file {path}: not UTF-8 text ({err.reason} at byte {err.start}); save it as UTF-8"
            ) from None
        if path.suffix not in (".json", ".yaml", ".yml"):
            raise SchemaError(f"schema file {path}: expected .json, .yaml or .yml")
        try:
            if path.suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
            else:
                data = json.loads(text)
        except ValueError as err:  # json's errors; yaml's are caught below
            raise SchemaError(f"schema file {path}: {err}") from err
        except Exception as err:  # yaml.YAMLError (PyYAML is imported only for YAML files)
            raise SchemaError(f"schema file {path}: {err}") from err
        if not isinstance(data, Mapping):
            raise SchemaError(f"schema file {path}: expected a mapping at the top level")
        try:
            return cls.from_dict(data)
        except (ValueError, TypeError) as err:
            raise SchemaError(f"schema file {path}: {err}") from err


def schema_from_uci_names(
    path: str | Path,
    *,
    bounds: Mapping[str, tuple[float, float]],
    label: str,
    classes: Sequence[str],
    label_aliases: Mapping[str, str] | None = None,
) -> TabularSchema:
    """A schema from a UCI ``.names`` file: each ``name: continuous.`` line a numeric column with
    the public ``bounds`` given here, each ``name: v1, v2, ….`` line a categorical column with the
    published categories, in the file's order.

    The class line (the first line of the form ``a, b.`` without a colon, e.g. ``>50K, <=50K.``
    in ``adult.names``) must list exactly ``classes``; ``classes`` fixes their encoding order.

    Raises:
        ValueError: no attribute lines, a numeric column without bounds, bounds for a column the
            file does not list, or published classes other than ``classes``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"UCI names file {path} does not exist")
    cols: list[Column] = []
    published: list[str] | None = None
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.split("|", 1)[0].strip()
        if not line.endswith("."):
            continue
        if ":" not in line:
            if published is None and "," in line:
                published = [v.strip() for v in line[:-1].split(",")]
            continue
        name, rest = (s.strip() for s in line[:-1].split(":", 1))
        if rest == "continuous":
            if name not in bounds:
                raise SchemaError(f"{path}: numeric column {name!r} has no public bounds")
            cols.append(Column(name, "numeric", bounds=bounds[name]))
        else:
            cols.append(Column(name, "categorical", categories=tuple(v.strip() for v in rest.split(","))))
    if not cols:
        raise SchemaError(f"{path}: no attribute lines ('name: continuous.' or 'name: v1, v2.')")
    extra = sorted(set(bounds) - {c.name for c in cols})
    if extra:
        raise SchemaError(f"bounds given for columns {path} does not list: {extra}")
    if published is None or sorted(published) != sorted(classes):
        raise SchemaError(f"{path}: published classes {published} differ from {list(classes)}")
    return TabularSchema(
        columns=tuple(cols),
        label=label,
        classes=tuple(classes),
        label_aliases=dict(label_aliases or {}),
        source=f"{path.name} (categories, column order, classes); numeric bounds chosen a priori",
        comment=UCI_COMMENT,
    )

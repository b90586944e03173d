"""A user's own data for the main job: arrays in Python, or files (``.npz``, ``.pt``, ``.npy``, CSV, image folders).

Three sets: the **private** set (x, y), the **public pool** (x only; labels, where given, are
used for reporting alone) and an optional **evaluation** set (x, y; labelled, not private).

What would shape a published output is never read from the private records (DESIGN.md facts 6
and 8): the number and names of the classes come from the user's declaration (``classes``, a
CSV schema) or from the evaluation set (labels or sub-folder names), never from the private
labels; the image size and channel count from a declaration (``image_shape``) or the public
pool's first image; CSV encodings from the public schema. Private data that does not fit is
refused with :class:`InputDataError`, which names the set, the file, the column or the index.

File kinds, read from the path: ``.npz`` (arrays ``x``, optional ``y`` and ``ids``), ``.pt``
(a dict with the same keys), ``.npy`` (the path holds x; labels in the file with the same name
and ``_y`` for the trailing ``_x``, ids in ``_ids``), ``.csv`` or any other text table given with
a schema (comma-separated, with a public schema:
:mod:`pate_stab.data.schema`), and a folder of images: the labelled sets in torchvision's
``ImageFolder`` layout (one sub-folder per class), the public pool a flat folder.

One module (about 450 lines) for every file kind, because the checks that refuse private data
which would shape a published output are shared by all of them and read best together.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pate_stab.data.own_files import POOL_LABELS, InputDataError, check_own_files, set_names
from pate_stab.data.schema import TabularSchema
from pate_stab.data.table_encoding import encode_checked, record_id_key
from pate_stab.data.table_rows import CheckedTable

__all__ = [
    "IMAGE_SUFFIXES",
    "EmptyClassWarning",
    "InputDataError",
    "OwnData",
    "load_files",
    "own_data",
    "read_array_inputs",
    "read_image_inputs",
]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


class EmptyClassWarning(UserWarning):
    """A declared class has no private example. The run goes on: whether a run exists must not depend on one
    private label (DESIGN.md fact 6). Shown in the terminal only, never written to a published file."""


@dataclass(frozen=True)
class OwnData:
    """A checked private set, public pool and optional evaluation set (float32 inputs, int64 labels).

    ``public_y`` is for reporting only (None: the pool has no labels); ``eval_x`` / ``eval_y``
    are None without an evaluation set. ``private_ids``: record ids supplied with the private
    set (for ``partition_key="record_id"``), or None. ``kind``: "arrays", "table" or "images".
    ``schema``: a table's public schema (:class:`~pate_stab.data.schema.TabularSchema`), kept so
    that the published student can encode new rows the same way; None for other kinds.
    """

    private_x: Tensor
    private_y: Tensor
    public_x: Tensor
    public_y: Tensor | None
    eval_x: Tensor | None
    eval_y: Tensor | None
    num_classes: int
    class_names: tuple[str, ...]
    private_ids: Tensor | None = None
    kind: str = "arrays"
    schema: TabularSchema | None = None


def _as_tensor(what: str, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value.detach().cpu()
    if isinstance(value, np.ndarray):
        if value.dtype == object or value.dtype.kind in "USV":
            raise InputDataError(f"{what} must hold numbers, got a NumPy array of dtype {value.dtype}")
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, tuple):
        raise InputDataError(f"{what} must be one array, got a tuple of {len(value)}")
    raise InputDataError(f"{what} must be a tensor or a NumPy array, got {type(value).__name__}")


def _inputs(what: str, x: Any) -> Tensor:
    x = _as_tensor(f"{what} inputs", x)
    if x.dtype == torch.bool or x.is_complex():
        raise InputDataError(f"{what} inputs must be real numbers, got dtype {x.dtype}")
    if x.dim() < 2:
        raise InputDataError(
            f"{what} inputs must have shape (n, features...) with at least 2 dimensions, got {tuple(x.shape)}"
        )
    if x.shape[0] == 0:
        raise InputDataError(f"{what} is empty (0 records)")
    x = x.float()
    bad = ~torch.isfinite(x.flatten(1)).all(1)
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0])
        raise InputDataError(f"{what} inputs: record {i} holds NaN or inf ({int(bad.sum())} records do)")
    return x


def _labels(what: str, y: Any, n: int, num_classes: int | None) -> Tensor:
    y = _as_tensor(f"{what} labels", y)
    if y.dim() != 1:
        raise InputDataError(f"{what} labels must be one integer per record (shape (n,)), got shape {tuple(y.shape)}")
    if y.shape[0] != n:
        raise InputDataError(f"{what}: x has {n} records but y has {y.shape[0]} labels")
    if y.is_floating_point() or y.dtype == torch.bool or y.is_complex():
        raise InputDataError(f"{what} labels must be integers (class indices), got dtype {y.dtype}")
    y = y.long()
    if num_classes is not None:
        bad = (y < 0) | (y >= num_classes)
        if bool(bad.any()):
            i = int(torch.nonzero(bad)[0])
            raise InputDataError(
                f"{what} labels must lie in [0, {num_classes}) ({num_classes} declared classes): "
                f"record {i} has label {int(y[i])}"
            )
    return y


def _string_ids(values: Any) -> bool:
    if isinstance(values, np.ndarray):
        return values.dtype == object or values.dtype.kind in "USV"
    return isinstance(values, list | tuple) and any(isinstance(v, str | bytes) for v in values)


def _id_as_given(values: Any, first: int, second: int, key: int) -> str:
    """A repeated id as the user wrote it (a string id, not its hashed key)."""
    if not _string_ids(values):
        return f"id {key}"
    a, b = values[first], values[second]
    a, b = (v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in (a, b))
    return f"id {a!r}" if str(a).strip() == str(b).strip() else f"ids {a!r} and {b!r} (one number)"


def _record_ids(what: str, values: Any, n: int) -> Tensor:
    """Record ids as int64 keys: integers as they are, strings through
    :func:`~pate_stab.data.table_encoding.record_id_key` (one per record; private, partition keys only)."""
    if isinstance(values, np.ndarray) and (values.dtype == object or values.dtype.kind in "USV"):
        values = values.tolist()
    if isinstance(values, list | tuple):
        if len(values) != n:
            raise InputDataError(f"{what} record ids must be one per record ({n}), got {len(values)}")
        keys = []
        for i, v in enumerate(values):
            try:
                keys.append(record_id_key(v))
            except ValueError as exc:
                raise InputDataError(f"{what} record ids: record {i}: {exc}") from None
        return torch.tensor(keys, dtype=torch.int64)
    ids = _as_tensor(f"{what} record ids", values)
    if ids.dim() != 1 or ids.shape[0] != n or ids.is_floating_point() or ids.dtype == torch.bool:
        raise InputDataError(
            f"{what} record ids must be one integer or string per record ({n}), got shape {tuple(ids.shape)} "
            f"dtype {ids.dtype}"
        )
    return ids.long()


def _class_list(classes: int | Sequence[str] | None, eval_y: Tensor | None) -> tuple[int, tuple[str, ...]]:
    """The classes: declared (a count or names), else read from the evaluation labels (public)."""
    if classes is None:
        if eval_y is None:
            raise InputDataError(
                "declare the classes (classes=C or a list of names; --classes): without an evaluation set "
                "they are not read from the private labels"
            )
        c = int(eval_y.max()) + 1 if eval_y.numel() else 0
        if bool((eval_y < 0).any()):
            raise InputDataError("evaluation labels must be non-negative class indices")
        return c, tuple(str(i) for i in range(c))
    if isinstance(classes, bool):
        raise InputDataError(f"classes must be a count or a list of names, got {classes!r}")
    if isinstance(classes, int):
        names: tuple[str, ...] = tuple(str(i) for i in range(classes))
    elif isinstance(classes, str):
        raise InputDataError(f"classes must be a count or a list of names, got the string {classes!r}")
    else:
        names = tuple(str(c) for c in classes)
        if len(set(names)) != len(names):
            raise InputDataError(f"class names must be distinct, got {list(names)}")
    if len(names) < 2:
        raise InputDataError(f"a classification task needs at least 2 classes, got {len(names)}")
    return len(names), names


def own_data(
    private: tuple[Any, Any],
    public: Any,
    evaluation: tuple[Any, Any] | None = None,
    *,
    classes: int | Sequence[str] | None = None,
    public_y: Any = None,
    private_ids: Any = None,
    kind: str = "arrays",
    names: dict[str, str] | None = None,
    schema: TabularSchema | None = None,
) -> OwnData:
    """Check a user's arrays (tensors or NumPy) and return them as an :class:`OwnData`.

    Args:
        private: (x, y): inputs (n, features...) and integer labels in [0, C).
        public: the public pool's inputs (m, features...), no labels.
        evaluation: (x, y), labelled like the private set; optional.
        classes: C, or the class names in label order. Without it, C is the largest
            evaluation label + 1 (the evaluation set is not private); never the private labels'.
        public_y: the pool's labels, for reporting only (never used by selection, student or settings).
        private_ids: one distinct id per private record (``partition_key="record_id"``): integers, or
            strings such as "P000123" (keyed through SHA-256); private, used as partition keys only.
        names: what to call each set in messages (e.g. its file); defaults "private set", …

    Raises:
        InputDataError: lengths differ, labels not integers in [0, C), NaN or inf, inputs of different
            shapes, an empty set, public labels passed as the pool's inputs — naming the set and the index.

    Warns:
        EmptyClassWarning: a declared class has no private example (the run goes on; terminal only).
    """
    label = {"private": "private set", "public": "public pool", "evaluation": "evaluation set", **(names or {})}
    if not isinstance(private, tuple | list) or len(private) != 2:
        raise InputDataError(f"{label['private']} must be a pair (x, y)")
    if isinstance(public, tuple | list):
        raise InputDataError(
            f"{label['public']} must be its inputs alone, got a {type(public).__name__} of {len(public)}: pass "
            "the pool's labels (reporting only) as public_y"
        )
    px = _inputs(label["private"], private[0])
    ux = _inputs(label["public"], public)
    ex = ey = None
    if evaluation is not None:
        if not isinstance(evaluation, tuple | list) or len(evaluation) != 2:
            raise InputDataError(f"{label['evaluation']} must be a pair (x, y)")
        ex = _inputs(label["evaluation"], evaluation[0])
        ey = _labels(label["evaluation"], evaluation[1], ex.shape[0], None)
    num_classes, class_names = _class_list(classes, ey)
    py = _labels(label["private"], private[1], px.shape[0], num_classes)
    if ey is not None:
        ey = _labels(label["evaluation"], ey, ex.shape[0], num_classes)  # type: ignore[union-attr]
    uy = None if public_y is None else _labels(label["public"], public_y, ux.shape[0], num_classes)
    for what, t in ((label["public"], ux), (label["evaluation"], ex)):
        if t is not None and t.shape[1:] != px.shape[1:]:
            raise InputDataError(
                f"{what} records have shape {tuple(t.shape[1:])}, the {label['private']}'s {tuple(px.shape[1:])}"
            )
    counts = torch.bincount(py, minlength=num_classes)
    if bool((counts == 0).any()):
        # a refusal here would make the run's existence depend on one private label (its neighbour with that
        # label changed runs): the class stays declared, its teachers never vote for it and the releasers see a
        # zero column, which the guarantee allows. The data holder is told; nothing published says it
        empty = [f"{int(c)} ({class_names[int(c)]!r})" for c in torch.nonzero(counts == 0).flatten()]
        warnings.warn(
            f"{label['private']}: declared class{'es' if len(empty) > 1 else ''} {', '.join(empty)} "
            f"{'have' if len(empty) > 1 else 'has'} no private example: no teacher votes for it and the student "
            "learns it only from what is released. The run goes on with the declared classes (this message "
            "depends on the private labels: it is for you, never for publication)",
            EmptyClassWarning,
            stacklevel=2,
        )
    ids = None
    if private_ids is not None:
        ids = _record_ids(label["private"], private_ids, px.shape[0])
        uniq, inverse, counts_ids = torch.unique(ids, return_inverse=True, return_counts=True)
        if bool((counts_ids > 1).any()):
            dup = int(uniq[counts_ids > 1][0])
            first, second = torch.nonzero(ids == dup).flatten()[:2].tolist()
            shown = _id_as_given(private_ids, first, second, dup)
            raise InputDataError(
                f"{label['private']} record ids must be distinct: records {first} and {second} (0-based indices) "
                f"share {shown}"
            )
    return OwnData(px, py, ux, uy, ex, ey, num_classes, class_names, ids, kind, schema)


# ---- files ---------------------------------------------------------------------------------------


def _npy_sibling(path: Path, suffix: str) -> Path:
    stem = path.stem
    base = stem[:-2] if stem.endswith("_x") else stem
    return path.with_name(f"{base}_{suffix}.npy")


def _read_arrays(path: Path) -> dict[str, Any]:
    """``x`` (and ``y``, ``ids`` where present) of an ``.npz``, ``.pt`` or ``.npy`` file."""
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    elif path.suffix == ".pt":
        data = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(data, dict):
            raise InputDataError(f"{path} must hold a dict with key 'x' (and 'y', 'ids'), got {type(data).__name__}")
    else:
        data = {"x": np.load(path, allow_pickle=False)}
        for key in ("y", "ids"):
            sibling = _npy_sibling(path, key)
            if sibling.is_file() and sibling != path:
                data[key] = np.load(sibling, allow_pickle=False)
    unknown = sorted(set(data) - {"x", "y", "ids"})
    if "x" not in data:
        hint = " (labels in the wrong place?)" if "y" in data or "labels" in data else ""
        raise InputDataError(f"{path} holds no inputs under key 'x'{hint}; keys: {sorted(data)}")
    if unknown:
        raise InputDataError(f"{path}: unknown keys {unknown}; expected 'x', optional 'y' and 'ids'")
    return data


def _image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def _subfolders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _decode(path: Path, shape: tuple[int, int, int] | None, convert: bool = False, reference: str = "") -> Tensor:
    """One image as float32 (C, H, W) in [0, 1]; its size must match ``shape``'s. Its channel count
    must too, unless ``convert`` (the user declared ``image_shape``): then it is converted to it."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            natural = {"L": 1, "1": 1, "I": 1, "F": 1, "I;16": 1, "RGBA": 4, "LA": 4}.get(img.mode, 3)
            channels = natural if shape is None else shape[0]
            if channels not in _MODES:
                raise InputDataError(f"image channels must be 1, 3 or 4, got {channels}")
            if natural != channels and not convert:
                raise InputDataError(
                    f"{path}: an image of {natural} channel(s) (mode {img.mode}) among images of {channels}"
                    f"{reference}: mixed channel counts are refused, not converted silently. Convert the images, or "
                    f"declare image_shape (--set image_shape={channels},H,W) to have every image converted"
                )
            arr = np.asarray(img.convert(_MODES[channels]), dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError) as exc:
        raise InputDataError(f"{path} is not a readable image ({exc})") from exc
    t = torch.from_numpy(arr.copy()).reshape(arr.shape[0], arr.shape[1], -1).permute(2, 0, 1)
    if shape is not None and tuple(t.shape[1:]) != tuple(shape[1:]):
        raise InputDataError(
            f"{path}: image of size {t.shape[2]}×{t.shape[1]} (width×height); every image must be "
            f"{shape[2]}×{shape[1]} like the public pool (or image_shape)"
        )
    return t


def _read_images(paths: list[Path], shape: tuple[int, int, int], convert: bool = False, reference: str = "") -> Tensor:
    if not paths:
        return torch.empty(0, *shape)
    return torch.stack([_decode(p, shape, convert, reference) for p in paths])


def _public_folder(
    folder: Path, shape: tuple[int, int, int] | None, convert: bool = False
) -> tuple[Tensor, tuple[int, int, int], str]:
    files = _image_files(folder)
    labelled = [d for d in _subfolders(folder) if _image_files(d)]
    if labelled:
        raise InputDataError(
            f"public pool {folder} has class sub-folders ({labelled[0].name}/, …): labels in the wrong place. The "
            "public pool is a flat folder of unlabelled images"
        )
    if not files:
        raise InputDataError(f"public pool {folder} holds no images ({', '.join(IMAGE_SUFFIXES)})")
    reference = " (image_shape)"
    if shape is None:
        first = _decode(files[0], None)
        shape = (int(first.shape[0]), int(first.shape[1]), int(first.shape[2]))
        reference = f" (like the public pool's first image, {files[0].name})"
    return _read_images(files, shape, convert, reference), shape, reference


def _labelled_folder(
    folder: Path,
    what: str,
    shape: tuple[int, int, int],
    class_names: Sequence[str],
    *,
    classes_from: str = "",
    convert: bool = False,
    reference: str = "",
) -> tuple[Tensor, Tensor]:
    subs = _subfolders(folder)
    loose = _image_files(folder)
    if loose:
        raise InputDataError(f"{what} {folder}: {loose[0].name} lies outside a class sub-folder (ImageFolder layout)")
    index = {name: i for i, name in enumerate(class_names)}
    xs, ys = [], []
    for sub in subs:
        files = _image_files(sub)
        if not files:
            continue
        if sub.name not in index:
            if classes_from:
                raise InputDataError(
                    f"{what} {folder}: sub-folder {sub.name!r} is not one of the classes read from {classes_from} "
                    f"{list(class_names)} (no classes were declared); add it there, or declare the classes "
                    "(--classes / classes:)"
                )
            raise InputDataError(
                f"{what} {folder}: sub-folder {sub.name!r} is not a declared class {list(class_names)}"
            )
        xs.append(_read_images(files, shape, convert, reference))
        ys.append(torch.full((len(files),), index[sub.name], dtype=torch.int64))
    if not xs:
        raise InputDataError(f"{what} {folder} holds no images in class sub-folders")
    return torch.cat(xs), torch.cat(ys)


def read_array_inputs(path: str | Path) -> Any:
    """The inputs ``x`` of an ``.npz``, ``.pt`` or ``.npy`` file (labels and ids, where present, are not read)."""
    return _read_arrays(Path(path))["x"]


def read_image_inputs(path: str | Path, shape: tuple[int, ...]) -> tuple[Tensor, list[str]]:
    """Images for prediction: one file, or every image of a folder and its sub-folders (sorted), decoded
    to ``shape`` (channels, height, width) like the run's images; and each file's path relative to ``path``."""
    path = Path(path)
    if path.is_file():
        files, names = [path], [path.name]
    else:
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        names = [str(p.relative_to(path)) for p in files]
        if not files:
            raise InputDataError(f"{path} holds no images ({', '.join(IMAGE_SUFFIXES)})")
    c, h, w = (int(s) for s in shape)
    return _read_images(files, (c, h, w), False, " (the run's images)"), names


def load_files(
    private: str | Path,
    public: str | Path,
    evaluation: str | Path | None = None,
    *,
    classes: int | Sequence[str] | None = None,
    schema: str | Path | TabularSchema | None = None,
    image_shape: Sequence[int] | None = None,
    pool_labels: bool = False,
    encoding: str | None = None,
) -> OwnData:
    """Read the three sets from files (their kind from the path) and check them (:func:`own_data`).

    Args:
        private, public, evaluation: paths (all of one kind: arrays, CSV or image folders).
        classes: C or class names. CSV: the schema's classes. Image folders: the names are
            the sub-folders they match; without a declaration they are the evaluation folder's
            sub-folders (sorted), never the private folder's.
        schema: CSV only: the public schema (a file or a :class:`TabularSchema`).
        image_shape: images only: (channels, height, width); default the public pool's first image.
            Declared, every image is converted to its channel count; without it, images whose channel
            count differs from the first public image's are refused (naming the file).
        pool_labels: the public pool's file holds true labels (an ``.npz``'s ``y``, the CSV's label
            column), declared for reporting only; without it such a file is refused (never taken
            as pool labels by a guess).
        encoding: CSV only: the files' text encoding (default UTF-8, a byte-order mark skipped).

    Raises:
        InputDataError: as :func:`own_data`, plus files of mixed kinds, unreadable or
            differently sized images (naming the file), and what
            :func:`~pate_stab.data.own_files.check_own_files` refuses in a CSV table: a column or a
            category the schema does not declare, a repeated record id, a missing label column,
            naming the file, the row, the column and the value.
        FileNotFoundError: a path that does not exist.
    """
    kind, sch, checked = check_own_files(
        private, public, evaluation, classes=classes, schema=schema, pool_labels=pool_labels, encoding=encoding
    )
    paths = {"private": Path(private), "public": Path(public)} | (
        {} if evaluation is None else {"evaluation": Path(evaluation)}
    )
    names = set_names(paths)
    if kind == "arrays":
        return _own_arrays(paths, names, classes=classes, pool_labels=pool_labels)
    if kind == "table":
        assert sch is not None
        return _own_table(checked, sch, names)
    return _own_images(paths, names, classes=classes, image_shape=image_shape)


def _own_arrays(
    paths: dict[str, Path], names: dict[str, str], *, classes: int | Sequence[str] | None, pool_labels: bool
) -> OwnData:
    """The three sets from array files (``.npz``, ``.pt``, ``.npy``); record ids on the private set only."""
    arrays = {role: _read_arrays(p) for role, p in paths.items()}
    if "y" not in arrays["private"]:
        raise InputDataError(f"{names['private']} holds no labels ('y')")
    ev = arrays.get("evaluation")
    if ev is not None and "y" not in ev:
        raise InputDataError(f"{names['evaluation']} holds no labels ('y')")
    for role in ("public", "evaluation"):
        if role in arrays and "ids" in arrays[role]:
            raise InputDataError(f"{names[role]}: record ids belong to the private set only")
    if "y" in arrays["public"] and not pool_labels:
        raise InputDataError(POOL_LABELS.format(what=names["public"], where="labels under key 'y'"))
    return own_data(
        (arrays["private"]["x"], arrays["private"]["y"]),
        arrays["public"]["x"],
        None if ev is None else (ev["x"], ev["y"]),
        classes=classes,
        public_y=arrays["public"].get("y"),
        private_ids=arrays["private"].get("ids"),
        names=names,
    )


def _own_table(checked: dict[str, CheckedTable], sch: TabularSchema, names: dict[str, str]) -> OwnData:
    """The three sets from CSV tables already checked against the public schema, encoded with it."""
    tables = {role: encode_checked(t, sch) for role, t in checked.items()}
    ev_t = tables.get("evaluation")
    return own_data(
        (tables["private"].x, tables["private"].y),
        tables["public"].x,
        None if ev_t is None else (ev_t.x, ev_t.y),
        classes=list(sch.classes),
        public_y=tables["public"].y,
        private_ids=tables["private"].ids,
        kind="table",
        names=names,
        schema=sch,
    )


def _own_images(
    paths: dict[str, Path],
    names: dict[str, str],
    *,
    classes: int | Sequence[str] | None,
    image_shape: Sequence[int] | None,
) -> OwnData:
    """The three sets from image folders: the shape declared or the public pool's, the classes declared or
    the evaluation folder's sub-folders (never the private folder's)."""
    shape = None
    if image_shape is not None:
        shape = tuple(int(s) for s in image_shape)
        if len(shape) != 3 or shape[0] not in _MODES or min(shape) < 1:
            raise InputDataError(
                f"image_shape must be (channels ∈ {{1, 3, 4}}, height, width), got {tuple(image_shape)}"
            )
    convert = shape is not None  # declared: every image converted to its channels
    ux, shape3, reference = _public_folder(paths["public"], shape, convert)  # type: ignore[arg-type]
    declared, classes_from = _image_classes(paths, classes)
    px, py = _labelled_folder(paths["private"], "private set", shape3, declared, classes_from=classes_from,
                              convert=convert, reference=reference)  # fmt: skip
    ev_xy = None
    if "evaluation" in paths:
        ev_xy = _labelled_folder(paths["evaluation"], "evaluation set", shape3, declared, convert=convert,
                                 reference=reference)  # fmt: skip
    return own_data((px, py), ux, ev_xy, classes=declared, kind="images", names=names)


def _image_classes(paths: dict[str, Path], classes: int | Sequence[str] | None) -> tuple[list[str], str]:
    """The declared class names of image folders, and where they were read from ("" when declared)."""
    if classes is None:
        if "evaluation" not in paths:
            raise InputDataError(
                "declare the classes (classes: [names] / --classes): without an evaluation folder they are not "
                "read from the private sub-folders"
            )
        declared = [d.name for d in _subfolders(paths["evaluation"]) if _image_files(d)]
        return declared, f"the evaluation folder {paths['evaluation']}"
    if isinstance(classes, int) and not isinstance(classes, bool):
        raise InputDataError("image folders need the class names (the sub-folder names), not a count")
    return [str(c) for c in classes], ""  # type: ignore[union-attr]

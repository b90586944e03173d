"""The published student as one self-contained file, ``student.pt``, and :func:`load_student`.

A student is only usable with the maps its inputs went through: a table's schema encoding, the
public pool's standardisation, a PCA or a feature extractor fitted on the public pool, and the
class names. ``student.pt`` holds all of them beside the network::

    {"format": "pate_stab.student/1", "spec", "config", "weights", "classes", "method",
     "inputs": {"kind": "arrays" | "table" | "images", "shape": [...], "schema": {...}?},
     "preprocess": [{"op": "standardize", "mean", "std"} | {"op": "pca", "state"} |
                    {"op": "flatten"} | {"op": "extract", "blocks": [...]} |
                    {"op": "unit_ball", "bound"} | {"op": "as_images"}, ...],
     "network": "tanh-cnn"?}

A direct learner's model (:mod:`pate_stab.run.direct`) is written in the same format: a linear
layer as a ``logistic`` spec after its own public map (the pool's standardisation, or the convex
heads' division by the public bound R and projection onto the unit ball, ``unit_ball``), and
DP-SGD's CNN with ``"network": "tanh-cnn"`` (:class:`pate_stab.direct.cnn.TanhCNN`, its spec's
``input_shape`` and ``num_classes``). Its file under ``direct/`` holds the record beside the
model's own fields, so :func:`load_student` reads it too.

Privacy: everything in it is public. The network is trained on released labels and public inputs
(post-processing of the release); the schema and the class names are the user's declarations (or
the evaluation set's); the standardisation, PCA and extractors are fitted on the public pool only
(:func:`pate_stab.run.data.load_task`, :mod:`pate_stab.run.features`). Nothing of the private
records enters the file except through the released labels.

:func:`load_student` (also ``pate_stab.load_student``) returns a :class:`PublishedStudent`; its
:meth:`~PublishedStudent.predict` takes RAW inputs of the run's kind — arrays shaped like the
run's records (NumPy or torch), a table's rows as a CSV path or dicts, images as (n, C, H, W) in
[0, 1] or an image folder — and applies the run's preprocessing before the network. Export to
TorchScript or ONNX is not provided: the preprocessing (schema encoding, scattering transforms)
is Python code around the network.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from pate_stab.data.tabular_data import standardize
from pate_stab.features.pca import PublicFeatures
from pate_stab.models.networks import ModelSpec, build_model

if TYPE_CHECKING:  # a run's configuration and task are needed to save a student, not to load one
    from pate_stab.run.config import TransferConfig
    from pate_stab.run.data import Task

__all__ = ["STUDENT_FORMAT", "PublishedStudent", "load_student", "published_student", "save_student"]

STUDENT_FORMAT = "pate_stab.student/1"


def _as_float(x: Any, what: str = "inputs") -> Tensor:
    if isinstance(x, Tensor):
        t = x.detach().cpu()
    elif isinstance(x, np.ndarray):
        if x.dtype == object or x.dtype.kind in "USV":
            raise ValueError(f"{what} must hold numbers, got a NumPy array of dtype {x.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(x))
    else:
        raise TypeError(f"{what} must be a NumPy array, a tensor, a file or folder path, or table rows; got "
                        f"{type(x).__name__}")  # fmt: skip
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{what} must be real numbers, got dtype {t.dtype}")
    return t.float()


def _extractor(block: Mapping[str, Any]) -> Any:
    """A feature extractor rebuilt from its published options and fitted state."""
    from pate_stab.features import make_features
    from pate_stab.features.ssl import SSLConfig

    options = dict(block["options"])
    if block["name"] == "ssl":
        options["config"] = SSLConfig(**options["config"])
    extractor = make_features(block["name"], **options)
    extractor.load_state_dict(block["state"])
    return extractor


@dataclass
class PublishedStudent:
    """A trained student with the public preprocessing of its run (module docstring).

    Attributes:
        network: the student's network (CPU, eval mode).
        spec: its architecture.
        classes: the class names; ``predict`` returns indices into them.
        inputs: what a raw record is (``kind``: "arrays", "table" or "images"; ``shape``; a
            table's ``schema`` as a dict).
        preprocess: the public maps applied to a raw record, in order.
        method: the run's ``student_method``.
        config: how it was trained (JSON-ready).
        trained: the in-memory student object of a run just finished (None when loaded from a file).
    """

    network: nn.Module
    spec: ModelSpec
    classes: tuple[str, ...]
    inputs: dict[str, Any]
    preprocess: list[dict[str, Any]]
    method: str = "supervised"
    config: dict[str, Any] = field(default_factory=dict)
    trained: Any = None
    network_kind: str | None = None  # "tanh-cnn": DP-SGD's CNN (module docstring); None: build_model(spec)
    _extractors: dict[int, list[Any]] = field(default_factory=dict, repr=False)

    # ---- file ---------------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """The content of ``student.pt`` (module docstring)."""
        return {
            "format": STUDENT_FORMAT,
            "spec": self.spec.to_dict(),
            "config": self.config,
            "weights": self.network.state_dict(),
            "classes": list(self.classes),
            "method": self.method,
            "inputs": self.inputs,
            "preprocess": self.preprocess,
            **({"network": self.network_kind} if self.network_kind is not None else {}),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any], where: str = "student file") -> PublishedStudent:
        if isinstance(record, Mapping) and record.get("format") is None and record.get("kind") in ("linear", "cnn"):
            raise ValueError(
                f"{where} is a direct learner's model written before direct models held their preprocessing, so it "
                "cannot be used for prediction alone. Rerun the run that made it (its spend replays from the ledger, "
                "nothing is spent): the rerun writes its self-contained student, "
                "<run>/students/<learner>_eps<ε>_r<r>.pt "
                "for a compare row or <run>/student.pt for a transfer"
            )
        if not isinstance(record, Mapping) or record.get("format") != STUDENT_FORMAT:
            found = record.get("format") if isinstance(record, Mapping) else type(record).__name__
            raise ValueError(
                f"{where} is not a self-contained pate_stab student ({STUDENT_FORMAT}); found {found!r}. A student.pt "
                "written before the format held its preprocessing cannot be used for prediction: rerun the run "
                "(its release replays from the ledger, no new spend) to rewrite it"
            )
        spec = ModelSpec(**record["spec"])
        kind = record.get("network")
        if kind == "tanh-cnn":
            from pate_stab.direct.cnn import TanhCNN

            network: nn.Module = TanhCNN(spec.input_shape, spec.num_classes)  # type: ignore[arg-type]
        elif kind is None:
            network = build_model(spec)
        else:
            raise ValueError(f"{where}: unknown network {kind!r}")
        network.load_state_dict(record["weights"])
        network.eval()
        return cls(network, spec, tuple(record["classes"]), dict(record["inputs"]), list(record["preprocess"]),
                   record.get("method", "supervised"), dict(record.get("config") or {}),
                   network_kind=kind)  # fmt: skip

    def save(self, path: str | Path) -> Path:
        """Write ``student.pt``, a published file replaced whole
        (:func:`~pate_stab.run.run_folder.write_published`)."""
        from pate_stab.run.run_folder import write_published

        path = Path(path)
        buffer = io.BytesIO()
        torch.save(self.record(), buffer)
        write_published(path, buffer.getvalue())
        return path

    # ---- inputs -------------------------------------------------------------------------------

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def read(
        self,
        path: str | Path,
        *,
        unknown_categories: str = "raise",
        fallbacks: Mapping[str, str] | None = None,
        encoding: str | None = None,
    ) -> tuple[Tensor, list[str]]:
        """Raw inputs of the run's kind read from a file or folder, and one name per input (a row
        number, or an image's path relative to the folder).

        Tables: a CSV encoded with the run's schema (a label or id column may be present and is
        ignored; a column the schema does not declare is refused). A categorical value outside
        its column's categories is refused (naming the row, column and value), unless
        ``unknown_categories="fallback"``: it then takes the column's declared fallback category
        (the schema's ``fallback``, or ``fallbacks[column]``, a declared category); ``encoding``
        is the file's text encoding (default UTF-8). Arrays: ``.npz`` / ``.pt``
        (key ``x``) or ``.npy``. Images: a folder (flat, or with sub-folders) or one image file,
        decoded like the run's images (channels and size of the run's records).
        """
        from pate_stab.data.own import read_array_inputs, read_image_inputs

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path} not found")
        kind = self.inputs.get("kind")
        if kind == "table":
            return self._table(path, unknown_categories=unknown_categories, fallbacks=fallbacks, encoding=encoding)
        if kind == "images" and (path.is_dir() or path.suffix.lower() not in (".npz", ".npy", ".pt")):
            return read_image_inputs(path, tuple(self.inputs["shape"]))
        x = read_array_inputs(path)
        return _as_float(x, str(path)), [str(i) for i in range(int(x.shape[0]))]

    def _table(
        self,
        rows: Any,
        *,
        unknown_categories: str = "raise",
        fallbacks: Mapping[str, str] | None = None,
        encoding: str | None = None,
    ) -> tuple[Tensor, list[str]]:
        from pate_stab.data.schema import TabularSchema, encode_table
        from pate_stab.data.table_rows import DEFAULT_ENCODING

        schema = self.inputs.get("schema")
        if schema is None:
            raise ValueError("this student's run read a table without a schema; pass the encoded rows as an array")
        sch = TabularSchema.from_dict(schema).with_fallbacks(fallbacks or {})
        if sch.unlisted == "other" and unknown_categories == "raise":
            unknown_categories = "other"  # declared in the schema: unlisted values took <other> in training too
        table = encode_table(
            rows, sch, undeclared="raise", unknown_categories=unknown_categories,  # type: ignore[arg-type]
            unknown_hint=_UNKNOWN_HINT, encoding=encoding or DEFAULT_ENCODING,
        )  # fmt: skip
        return table.x, [str(i) for i in range(len(table))]

    def features(self, x: Any) -> Tensor:
        """Raw inputs (arrays, a table's encoded rows or rows as dicts / a CSV path, images) → the
        network's inputs, through the run's public preprocessing."""
        if isinstance(x, str | Path):
            t, _ = self.read(x)
        elif isinstance(x, Sequence) and not isinstance(x, Tensor | np.ndarray) and x and isinstance(x[0], Mapping):
            t, _ = self._table(x)
        else:
            t = _as_float(x)
        shape = tuple(self.inputs.get("shape", ()))
        if shape and tuple(t.shape[1:]) != shape:
            raise ValueError(
                f"inputs have records of shape {tuple(t.shape[1:])}; this student's run read records of shape "
                f"{shape} ({self.inputs.get('kind')})"
            )
        for i, step in enumerate(self.preprocess):
            op = step["op"]
            if op == "standardize":
                t = standardize(t, mean=step["mean"], std=step["std"]) if t.shape[0] else t
            elif op == "pca":
                t = PublicFeatures.from_state_dict(step["state"]).transform(t) if t.shape[0] else t
            elif op == "flatten":
                t = t.flatten(1)
            elif op == "as_images":  # DP-SGD's CNN: (n, H, W) images gain their one channel
                t = t.unsqueeze(1) if t.dim() == 3 else t
            elif op == "unit_ball":  # the convex heads' map: x / R, projected onto the unit ball
                z = t.double() / float(step["bound"])
                t = (z / torch.linalg.vector_norm(z, dim=1, keepdim=True).clamp(min=1.0)).float()
            elif op == "extract":
                if i not in self._extractors:
                    self._extractors[i] = [_extractor(block) for block in step["blocks"]]
                parts = []
                for block, extractor in zip(step["blocks"], self._extractors[i], strict=True):
                    f = extractor.transform(t)
                    parts.append(f / block["scale"] if block["scale"] is not None else f)
                t = torch.cat(parts, dim=1)
            else:
                raise ValueError(f"unknown preprocessing step {op!r} in the student file")
        return t

    # ---- predictions --------------------------------------------------------------------------

    @torch.no_grad()
    def predict_proba(self, x: Any, *, batch_size: int = 4096) -> Tensor:
        """Class probabilities (n, C) float32 of raw inputs (:meth:`features`)."""
        f = self.features(x)
        self.network.eval()
        device = next(self.network.parameters()).device
        out = [
            self.network(f[i : i + batch_size].to(device)).float().softmax(-1).cpu()
            for i in range(0, len(f), batch_size)
        ]
        return torch.cat(out) if out else torch.empty(0, self.num_classes)

    def predict(self, x: Any) -> Tensor:
        """Predicted class indices (n,) int64 of raw inputs; ``classes[i]`` names index i."""
        return self.predict_proba(x).argmax(-1)

    def accuracy(self, x: Any, y: Any) -> float:
        """Share of raw inputs ``x`` predicted as their labels ``y`` (class indices)."""
        y = torch.as_tensor(np.asarray(y) if not isinstance(y, Tensor) else y).long()
        return float((self.predict(x) == y).double().mean()) if len(y) else float("nan")


def published_student(student: Any, task: Task, config: TransferConfig) -> PublishedStudent:
    """The run's trained student with its task's public preprocessing (a fixmatch student reads images)."""
    reads_images = config.student.student_method == "fixmatch" and task.public_images is not None
    inputs = dict(task.inputs)
    preprocess = [] if reads_images else list(task.preprocess)
    if not inputs:  # a task built without a description (tests): its inputs as the student sees them
        inputs = {"kind": "arrays", "shape": list(task.public_x.shape[1:])}
    names = task.class_names if task.class_names is not None else tuple(str(c) for c in range(task.num_classes))
    return PublishedStudent(
        student.network,
        student.spec,
        tuple(names),
        inputs,
        preprocess,
        config.student.student_method,
        student.config.to_dict(),
        trained=student,
    )


def save_student(path: str | Path, student: Any, task: Task, config: TransferConfig) -> PublishedStudent:
    """Write the run's student with its public preprocessing to ``path`` (``student.pt``)."""
    published = published_student(student, task, config)
    published.save(path)
    return published


_UNKNOWN_HINT = (
    ". To give such values a declared category instead, ask for it: pate-stab predict --unknown-category fallback, "
    "with the column's fallback declared in the schema ('fallback') or given as --fallback COLUMN=CATEGORY (in "
    "Python: unknown_categories='fallback', fallbacks={column: category})"
)


def load_student(path: str | Path) -> PublishedStudent:
    """Load a published student (``<run>/student.pt``, or a compare row's ``students/<name>.pt``).

    Example::

        import pate_stab
        student = pate_stab.load_student("checkpoints/mine/student.pt")
        student.predict(new_x)            # class indices; student.classes names them
        student.predict_proba("new.csv")  # (n, C) probabilities; a CSV read with the run's schema

    Raises:
        FileNotFoundError: no such file. ValueError: not a self-contained student file.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "student.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    record = torch.load(path, map_location="cpu", weights_only=True)
    return PublishedStudent.from_record(record, str(path))

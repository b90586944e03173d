"""k teachers as one vectorised model: the trained ensemble, its exports, its files.

Teacher j's parameters are slice ``[j]`` of every stacked tensor (shape ``(k, *shape)``); their
initialisation and forward pass are :mod:`pate_stab.models.stacked` (dense teachers as one batched
matrix product per layer, the CNN as ``vmap`` over the leading axis), the per-teacher optimisers
that train them :mod:`pate_stab.models.stacked_optim`. Teachers never mix: teacher j's output
depends only on its parameters and its own inputs, and the training loss is the *sum* of the
per-teacher losses, so teacher j's gradient is exactly the gradient of its own loss.

Exports for the aggregators: :meth:`TeacherEnsemble.predict_votes` → (k, m) int64 class
indices and :meth:`TeacherEnsemble.predict_scores` → (k, m, C) probabilities (or (k, m)
probabilities of class 1 for binary tasks).
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm import tqdm

from pate_stab._checks import check_int, check_tensor
from pate_stab.models.networks import ModelSpec, build_model
from pate_stab.models.stacked import stacked_forward
from pate_stab.privacy.ledger.private_files import private_folder, write_private

__all__ = ["TeacherEnsemble"]


# floats in the widest activation of one prediction chunk (256 MiB in float32); a CNN's first
# convolution output is ~10^4 floats per teacher and input, so 256 teachers × 1024 inputs would be 13 GB
PREDICTION_ACTIVATION_BUDGET = 2**26


def widest_activation(spec: ModelSpec) -> int:
    """Floats in the widest layer output of one teacher on one input (sizes prediction chunks)."""
    if spec.kind == "cnn":
        c, h, w = spec.input_shape
        convs = (spec.channels[0] * h * w, spec.channels[1] * (h // 2) * (w // 2))
        return max((*convs, *spec.hidden, spec.num_classes))
    hidden = spec.hidden if spec.kind == "mlp" else ()
    return max((*hidden, spec.num_classes))


def _param_key(name: str) -> str:
    return name.replace(".", "__")


class TeacherEnsemble:
    """Trained teachers with stacked parameters and the exports the aggregators read.

    Attributes:
        spec: the architecture of every teacher.
        params: ``{name: (k, *shape)}`` float32 tensors on CPU (copies on a GPU: :meth:`params_on`).
        teacher_indices: global index of each teacher held here (``arange(k)`` unless the
            ensemble was trained in slices, see :func:`pate_stab.teachers.train_teachers`).
        config: the training configuration and seeds (JSON-serialisable).
        metrics: per-teacher training metrics, ``{"train_loss": (epochs, k), …}``.
    """

    def __init__(
        self,
        spec: ModelSpec,
        params: dict[str, Tensor],
        *,
        teacher_indices: Tensor | None = None,
        config: dict[str, Any] | None = None,
        metrics: dict[str, Tensor] | None = None,
    ) -> None:
        sizes = {p.shape[0] for p in params.values()}
        if len(sizes) != 1:
            raise ValueError(f"stacked parameters disagree on the number of teachers: {sizes}")
        self.spec = spec
        self.params = {n: p.detach().cpu() for n, p in params.items()}
        k = sizes.pop()
        self.teacher_indices = torch.arange(k) if teacher_indices is None else teacher_indices.long().cpu()
        self.config = dict(config or {})
        self.metrics = dict(metrics or {})
        self._base = build_model(spec)
        self._on_device: dict[str, dict[str, Tensor]] = {}  # params_on's copies, by device

    @property
    def num_teachers(self) -> int:
        return int(self.teacher_indices.shape[0])

    @property
    def num_classes(self) -> int:
        return self.spec.num_classes

    def params_on(self, device: str | torch.device) -> dict[str, Tensor]:
        """The stacked parameters on ``device``, moved there on the first request and kept (votes on a
        GPU then copy the weights once per run, not once per call). The CPU copy (``params``) stays
        the one that is saved."""
        device = torch.device(device)
        if device.type == "cpu":
            return self.params
        key = str(device)
        if key not in self._on_device:
            self._on_device[key] = {n: p.to(device) for n, p in self.params.items()}
        return self._on_device[key]

    @torch.no_grad()
    def _logit_chunks(
        self,
        x: Tensor,
        batch_size: int,
        teacher_chunk: int,
        device: str | torch.device,
        progress: bool = False,
    ):
        x = check_tensor("x", x, floating=True)
        batch_size = check_int("batch_size", batch_size, minimum=1)
        teacher_chunk = check_int("teacher_chunk", teacher_chunk, minimum=1)
        # (teacher, input) pairs per chunk, so the widest activation stays within the budget
        pairs = max(1, PREDICTION_ACTIVATION_BUDGET // widest_activation(self.spec))
        teacher_chunk = min(teacher_chunk, self.num_teachers, pairs)
        batch_size = min(batch_size, max(1, pairs // teacher_chunk))
        base = self._base.to(device)
        stacked = self.params_on(device)  # kept on the device between calls
        x = x.to(device)  # the whole input moves once; chunks are slices on the device
        chunks = math.ceil(self.num_teachers / teacher_chunk) * math.ceil(x.shape[0] / batch_size)
        with tqdm(total=chunks, desc="teacher votes", unit="chunk", disable=not progress, leave=False) as bar:
            for t0 in range(0, self.num_teachers, teacher_chunk):
                params = {n: p[t0 : t0 + teacher_chunk] for n, p in stacked.items()}
                for b0 in range(0, x.shape[0], batch_size):
                    yield (
                        t0,
                        b0,
                        stacked_forward(base, params, x[b0 : b0 + batch_size], shared_input=True),
                    )  # (kc, b, C)
                    bar.update()

    @staticmethod
    def _device(x: Tensor, device: str | torch.device | None) -> torch.device:
        return x.device if device is None else torch.device(device)

    def predict_votes(
        self,
        x: Tensor,
        *,
        batch_size: int = 1024,
        teacher_chunk: int = 256,
        device: str | torch.device | None = None,
        progress: bool = False,
    ) -> Tensor:
        """Each teacher's predicted class on each input: (k, m) int64 in {0, …, C − 1}, on the CPU.

        ``device``: where the teachers run (None: where ``x`` is); the votes are gathered there and
        come back to the CPU once. ``progress`` shows a tqdm bar over (teacher chunk, input batch) pairs.
        """
        target = self._device(x, device)
        x = x.to(target)  # the whole input moves once
        out = torch.empty(self.num_teachers, x.shape[0], dtype=torch.int64, device=x.device)
        for t0, b0, logits in self._logit_chunks(x, batch_size, teacher_chunk, target, progress):
            out[t0 : t0 + logits.shape[0], b0 : b0 + logits.shape[1]] = logits.argmax(-1)
        return out.cpu()

    def predict_scores(
        self,
        x: Tensor,
        *,
        binary: bool = False,
        batch_size: int = 1024,
        teacher_chunk: int = 256,
        device: str | torch.device | None = None,
        progress: bool = False,
    ) -> Tensor:
        """Each teacher's class probabilities (softmax), float32 in [0, 1], on the CPU; ``device`` as
        :meth:`predict_votes`; ``progress``: a tqdm bar.

        Returns:
            (k, m, C); with ``binary=True`` (two classes only) (k, m), the probability of class 1.
        """
        if binary and self.num_classes != 2:
            raise ValueError(f"binary=True needs a two-class ensemble, this one has {self.num_classes} classes")
        target = self._device(x, device)
        x = x.to(target)  # the whole input moves once
        out = torch.empty(self.num_teachers, x.shape[0], self.num_classes, dtype=torch.float32, device=x.device)
        for t0, b0, logits in self._logit_chunks(x, batch_size, teacher_chunk, target, progress):
            out[t0 : t0 + logits.shape[0], b0 : b0 + logits.shape[1]] = logits.float().softmax(-1)
        return (out[..., 1].contiguous() if binary else out).cpu()

    def save(self, directory: str | Path) -> Path:
        """Write ``config.json`` (spec, config, teacher indices) and ``weights.pt`` (stacked).

        The teachers are models of the private data that no mechanism paid for: ``directory`` is
        made a private folder (mode 0700) and both files are written owner-only (0600, atomically;
        :mod:`pate_stab.privacy.ledger.private_files`).
        """
        directory = private_folder(directory)
        meta = {
            "spec": self.spec.to_dict(),
            "config": self.config,
            "teacher_indices": self.teacher_indices.tolist(),
        }
        write_private(directory / "config.json", json.dumps(meta, indent=2))
        buffer = io.BytesIO()
        torch.save({"params": self.params, "metrics": self.metrics}, buffer)
        write_private(directory / "weights.pt", buffer.getvalue())
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> TeacherEnsemble:
        """Read an ensemble written by :meth:`save`."""
        directory = Path(directory)
        for name in ("config.json", "weights.pt"):
            if not (directory / name).is_file():
                raise FileNotFoundError(f"no teacher ensemble in {directory}: {name} is missing")
        meta = json.loads((directory / "config.json").read_text())
        blob = torch.load(directory / "weights.pt", map_location="cpu", weights_only=True)
        return cls(
            ModelSpec(**meta["spec"]),
            blob["params"],
            teacher_indices=torch.tensor(meta["teacher_indices"]),
            config=meta["config"],
            metrics=blob.get("metrics", {}),
        )

    @classmethod
    def concatenate(cls, parts: Sequence[TeacherEnsemble]) -> TeacherEnsemble:
        """Join ensembles trained on slices of the teacher indices (e.g. on different devices)."""
        if not parts:
            raise ValueError("nothing to concatenate")
        spec = parts[0].spec
        if any(p.spec != spec for p in parts):
            raise ValueError("all parts must have the same ModelSpec")
        idx = torch.cat([p.teacher_indices for p in parts])
        if idx.unique().numel() != idx.numel():
            raise ValueError("the parts hold overlapping teacher indices")
        order = torch.argsort(idx)
        params = {n: torch.cat([p.params[n] for p in parts])[order] for n in parts[0].params}
        return cls(spec, params, teacher_indices=idx[order], config=parts[0].config)

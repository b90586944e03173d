"""The student of BTT18 Alg 5: a non-private learner trained on privately labelled public data.

Everything here is post-processing of the release. The student's inputs are the public queries
and the labels the releaser published for them, plus — in the semi-supervised mode — the
*unlabelled* public pool. The API takes exactly those tensors and nothing else: private records,
their labels and the evaluation split never reach this module (the pipeline passes public
tensors only, and ``tests/student`` checks it with a sentinel).

Targets: class indices (cross-entropy) for hard labels; binary scores in [0, 1] for the
soft-label releaser (binary cross-entropy on the difference of the two logits, i.e. on
log p(1|x) − log p(0|x)).

Semi-supervised mode (``pseudo_label_rounds > 0``): after the supervised fit, the student
labels the unlabelled public pool; inputs whose top predicted probability is at least
``pseudo_label_threshold`` join the training set with that label and the student is refitted
from its initialisation (self-training / pseudo-labelling, Lee 2013). Only public inputs and
released labels enter, so it is post-processing too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from pate_stab._checks import check_generator, check_int, check_nonnegative, check_positive, check_tensor
from pate_stab.models.fitting import fit_module
from pate_stab.models.networks import ModelSpec, build_model, init_parameters
from pate_stab.rng import child_seed
from pate_stab.student.targets import StudentTargets

__all__ = ["StudentConfig", "StudentModule", "Student", "StudentPredictions", "train_student"]


@dataclass(frozen=True)
class StudentConfig:
    """Student hyper-parameters.

    Attributes:
        epochs: passes over the (pseudo-)labelled set per fit.
        batch_size, lr, weight_decay: Adam settings.
        pseudo_label_rounds: semi-supervised rounds on the unlabelled public pool (0: off).
        pseudo_label_threshold: minimum top-class probability for a pseudo-label.
    """

    epochs: int = 20
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    pseudo_label_rounds: int = 0
    pseudo_label_threshold: float = 0.95

    def __post_init__(self) -> None:
        check_int("epochs", self.epochs, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_positive("lr", self.lr)
        check_nonnegative("weight_decay", self.weight_decay)
        check_int("pseudo_label_rounds", self.pseudo_label_rounds, minimum=0)
        if not (0.0 < self.pseudo_label_threshold <= 1.0):
            raise ValueError(f"pseudo_label_threshold must lie in (0, 1], got {self.pseudo_label_threshold}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class StudentModule(L.LightningModule):
    """Wraps an injected network; cross-entropy on class targets or BCE on binary scores."""

    def __init__(self, network: nn.Module, *, soft: bool, lr: float, weight_decay: float) -> None:
        super().__init__()
        self.network = network
        self.soft, self.lr, self.weight_decay = soft, lr, weight_decay

    def forward(self, x: Tensor) -> Tensor:
        return self.network(x)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, target = batch
        logits = self(x)  # (B, C)
        if self.soft:
            margin = logits[:, 1] - logits[:, 0]  # log p(1|x) − log p(0|x)
            loss = F.binary_cross_entropy_with_logits(margin, target.float())
        else:
            loss = F.cross_entropy(logits, target)
        self.log("student_loss", loss, prog_bar=True, on_step=False, on_epoch=True, batch_size=x.shape[0])
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)


class StudentPredictions:
    """Prediction methods shared by the students; the subclass (a dataclass) holds the fields."""

    spec: ModelSpec
    network: nn.Module
    config: Any  # a config dataclass with ``to_dict()``

    @torch.no_grad()
    def predict_proba(self, x: Tensor, *, batch_size: int = 4096) -> Tensor:
        """Class probabilities (n, C) float32."""
        self.network.eval()
        device = next(self.network.parameters()).device
        out = [
            self.network(x[i : i + batch_size].to(device)).float().softmax(-1).cpu()
            for i in range(0, len(x), batch_size)
        ]
        return torch.cat(out) if out else torch.empty(0, self.spec.num_classes)

    def predict(self, x: Tensor) -> Tensor:
        """Predicted classes (n,) int64."""
        return self.predict_proba(x).argmax(-1)

    def accuracy(self, x: Tensor, y: Tensor) -> float:
        return float((self.predict(x) == y).double().mean()) if len(y) else float("nan")

    def state_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "config": self.config.to_dict(), "weights": self.network.state_dict()}


@dataclass
class Student(StudentPredictions):
    """A trained student: the network, how it was trained and, where its settings were chosen by
    cross-validation, the record of that choice (``selection``)."""

    spec: ModelSpec
    network: nn.Module
    config: StudentConfig
    history: list[dict[str, Any]]
    selection: dict[str, Any] | None = None


def _fit(
    spec: ModelSpec,
    x: Tensor,
    targets: Tensor,
    *,
    soft: bool,
    config: StudentConfig,
    init_seed: int,
    data_seed: int,
    accelerator: str,
    progress_bar: bool,
) -> nn.Module:
    network = initialised_network(spec, init_seed)
    if x.shape[0] == 0:
        return network
    module = StudentModule(network, soft=soft, lr=config.lr, weight_decay=config.weight_decay)
    data_gen = torch.Generator()
    data_gen.manual_seed(data_seed)
    loader = DataLoader(TensorDataset(x, targets), batch_size=config.batch_size, shuffle=True, generator=data_gen)
    fit_module(module, loader, accelerator=accelerator, progress_bar=progress_bar, max_epochs=config.epochs)
    return module.network.cpu()


def initialised_network(spec: ModelSpec, seed: int) -> nn.Module:
    """A student network of ``spec`` with its parameters drawn from ``seed``."""
    generator = torch.Generator()
    generator.manual_seed(seed)
    return init_parameters(build_model(spec), generator=generator)


def train_student(
    query_x: Tensor,
    released: StudentTargets,
    *,
    spec: ModelSpec,
    config: StudentConfig | None = None,
    generator: torch.Generator,
    unlabelled_x: Tensor | None = None,
    accelerator: str = "auto",
    progress_bar: bool = False,
) -> Student:
    """Train a student on the public queries with their released labels (BTT18 Alg 5).

    Args:
        query_x: the public queries x_1 … x_m, (m, …) float32 — public data only.
        released: the targets built from the release (:func:`hard_targets` / :func:`soft_targets`).
        spec: the student's architecture (``ModelSpec``; same families as the teachers).
        config: hyper-parameters (default :class:`StudentConfig()`).
        generator: initialisation and data-order seeds are drawn from it.
        unlabelled_x: unlabelled public inputs for the semi-supervised mode (ignored when
            ``config.pseudo_label_rounds == 0``).
        accelerator, progress_bar: passed to ``lightning.Trainer``.

    Returns:
        A :class:`Student` (network on CPU). Training on an empty labelled set returns the
        initialised network untrained (history says so).
    """
    config = config or StudentConfig()
    check_generator(generator)
    query_x = check_tensor("query_x", query_x, floating=True, nonempty=False)
    if not isinstance(released, StudentTargets):
        raise TypeError(f"released must be StudentTargets, got {type(released).__name__}")
    if released.index.numel() and int(released.index.max()) >= query_x.shape[0]:
        raise ValueError("released targets index queries beyond query_x")
    init_seed, data_seed = child_seed(generator), child_seed(generator)
    x, t = query_x[released.index], released.targets
    fit_args: dict[str, Any] = {
        "soft": released.soft,
        "config": config,
        "init_seed": init_seed,
        "accelerator": accelerator,
        "progress_bar": progress_bar,
    }
    network = _fit(spec, x, t, data_seed=data_seed, **fit_args)
    history: list[dict[str, Any]] = [{"round": 0, "labelled": int(x.shape[0]), "pseudo_labelled": 0}]
    student = Student(spec, network, config, history)
    if config.pseudo_label_rounds and unlabelled_x is not None and len(unlabelled_x) and x.shape[0]:
        pool = check_tensor("unlabelled_x", unlabelled_x, floating=True)
        for r in range(1, config.pseudo_label_rounds + 1):
            proba = student.predict_proba(pool)  # (n_pool, C)
            confidence, guess = proba.max(-1)
            keep = confidence >= config.pseudo_label_threshold
            extra_t = proba[keep, 1] if released.soft else guess[keep]
            xr = torch.cat([x, pool[keep]])
            tr = torch.cat([t.to(extra_t.dtype), extra_t])
            network = _fit(spec, xr, tr, data_seed=child_seed(generator), **fit_args)
            student = Student(spec, network, config, history)
            history.append({"round": r, "labelled": int(x.shape[0]), "pseudo_labelled": int(keep.sum())})
    return student

"""A private linear head usable on any feature matrix (e.g. features of a public-data model).

``PrivateLinearHead`` wraps output or objective perturbation behind ``fit`` /
``decision_function`` / ``predict``, so a private convex head can sit beside the PATE students
in the knowledge-transfer comparison. The features must satisfy the input contract (rows with
||x|| <= 1): scale them with a data-independent bound (e.g. a bound known from the public feature
extractor) or pass ``clip=True`` to project rows onto the ball. Multi-class labels are handled
one-vs-rest, each of the C binary heads at epsilon / C (basic composition).
"""

from __future__ import annotations

import torch

from pate_stab._validation import check_epsilon, check_generator, check_positive, check_tensor
from pate_stab.erm.losses import get_loss
from pate_stab.erm.objective_perturbation import objective_perturbation
from pate_stab.erm.output_perturbation import PrivateLinearModel, output_perturbation

__all__ = ["PrivateLinearHead"]

_DTYPE = torch.float64


class PrivateLinearHead:
    """epsilon-DP linear classifier/regressor head.

    Args:
        epsilon: total privacy budget of ``fit`` (replace-one neighbours).
        lam: regularization.
        loss: ``logistic``, ``huber_hinge``, ``hinge`` (output perturbation only) or ``squared``.
        mechanism: ``"output"`` or ``"objective"`` perturbation.
        radius: optional ||w|| <= R (required for ``squared``).
        clip: project rows outside the unit ball onto it.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        lam: float,
        loss: str = "logistic",
        mechanism: str = "output",
        radius: float | None = None,
        clip: bool = False,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.lam = check_positive("lam", lam)
        self.loss = get_loss(loss).name
        if mechanism not in ("output", "objective"):
            raise ValueError(f"mechanism must be 'output' or 'objective', got {mechanism!r}")
        self.mechanism = mechanism
        self.radius = radius
        self.clip = clip
        self.models_: list[PrivateLinearModel] = []
        self.classes_: torch.Tensor | None = None

    def _fit_one(self, x: torch.Tensor, y: torch.Tensor, eps: float, gen: torch.Generator) -> PrivateLinearModel:
        fn = output_perturbation if self.mechanism == "output" else objective_perturbation
        return fn(x, y, epsilon=eps, lam=self.lam, generator=gen, loss=self.loss, radius=self.radius, clip=self.clip)

    def fit(self, x: object, y: object, *, generator: torch.Generator) -> PrivateLinearHead:
        """Fit on features ``x`` (n, d) and labels ``y``: {-1, 1}, class indices, or targets."""
        gen = check_generator(generator)
        xt = check_tensor("x", x, ndim=2).to(_DTYPE)
        yt = check_tensor("y", y, ndim=1)
        if get_loss(self.loss).task == "regression":
            self.classes_ = None
            self.models_ = [self._fit_one(xt, yt.to(_DTYPE), self.epsilon, gen)]
            return self
        classes = torch.unique(yt)
        if classes.numel() < 2:
            raise ValueError("y must contain at least two classes")
        self.classes_ = classes
        if classes.numel() == 2:
            ypm = torch.where(yt == classes[1], 1.0, -1.0).to(_DTYPE)
            self.models_ = [self._fit_one(xt, ypm, self.epsilon, gen)]
        else:
            eps = self.epsilon / classes.numel()
            self.models_ = [self._fit_one(xt, torch.where(yt == c, 1.0, -1.0).to(_DTYPE), eps, gen) for c in classes]
        return self

    def decision_function(self, x: object) -> torch.Tensor:
        """<w, x> per row (n,), or per class (n, C) for more than two classes."""
        if not self.models_:
            raise RuntimeError("PrivateLinearHead is not fitted; call fit first")
        xt = check_tensor("x", x, ndim=2).to(_DTYPE)
        scores = torch.stack([xt @ m.weights.to(xt.device) for m in self.models_], dim=1)
        return scores[:, 0] if len(self.models_) == 1 else scores

    def predict(self, x: object) -> torch.Tensor:
        """Class labels (as given to ``fit``) or regression values."""
        s = self.decision_function(x)
        if self.classes_ is None:
            return s
        if s.dim() == 1:
            return torch.where(s > 0, self.classes_[1], self.classes_[0])
        return self.classes_[torch.argmax(s, dim=1)]

    def predict_proba(self, x: object) -> torch.Tensor:
        """P(y = classes_[1]) for a binary logistic head."""
        if self.loss != "logistic" or self.classes_ is None or self.classes_.numel() != 2:
            raise ValueError("predict_proba is defined for a binary logistic head only")
        return torch.sigmoid(self.decision_function(x))

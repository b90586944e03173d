"""A private linear head usable on any feature matrix (e.g. features of a public-data model).

``PrivateLinearHead`` wraps output or objective perturbation behind ``fit`` /
``decision_function`` / ``predict``, so a private convex head can sit beside the PATE students
in the knowledge-transfer comparison. The features must satisfy the input contract (rows with
||x|| <= 1): scale them with a data-independent bound (e.g. a bound known from the public feature
extractor) or pass ``clip=True`` to project rows onto the ball. Multi-class labels are handled
one-vs-rest, each of the C binary heads at epsilon / C (basic composition).

The class set is declared (``classes``), never read from the labels (DESIGN.md facts 6 and 11): it
fixes how many heads are fitted, the ε each gets and the shape of the published weights, and a
class present in one neighbouring data set only (its one record removed or relabelled) would
change all three. Labels outside the declared set are refused.

:func:`public_divisor_lambda` gives the regularisation under which the library's (1/n)-normalised
solvers minimise the objective with a fixed public divisor N instead of the private count n (the main
job's convex heads, :mod:`pate_stab.direct.learners`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pate_stab._checks import check_epsilon, check_generator, check_int, check_positive, check_tensor
from pate_stab.erm.losses import get_loss
from pate_stab.erm.objective_perturbation import objective_perturbation
from pate_stab.erm.output_perturbation import PrivateLinearModel, output_perturbation

__all__ = ["PrivateLinearHead", "public_divisor_lambda"]

_DTYPE = torch.float64


def public_divisor_lambda(lam: float, *, public_size: int, private_size: int) -> float:
    """λ′ = λ·N/n: the regularisation that makes the (1/n)-normalised objective minimise J with divisor N.

    Chaudhuri, Monteleoni & Sarwate 2011 (JMLR 12; Thm 6 output, Thm 9 objective perturbation)
    minimise J_n(w) = (1/n) Σ ℓ(w, z_i) + (λ/2)||w||² for a fixed, public n. With a fixed public
    divisor N instead, J(w) = (1/N) Σ ℓ(w, z_i) + (λ/2)||w||² = (n/N)·J_n(w; λ′) with λ′ = λN/n, so
    the solvers' minimiser of J_n(·; λ′) is J's, and every noise scale, a function of λ′n = λN, is
    the paper's with n := N (the argument for both relations: :mod:`pate_stab.direct.learners`, "The
    heads' public size"). n, the private count, stays inside the mechanism.

    Example:
        >>> public_divisor_lambda(1e-3, public_size=60000, private_size=30000)
        0.002
    """
    lam = check_positive("lam", lam)
    n_public = check_int("public_size", public_size, minimum=1)
    n = check_int("private_size", private_size, minimum=1)
    return lam * (n_public / n)


class PrivateLinearHead:
    """epsilon-DP linear classifier/regressor head.

    Args:
        epsilon: total privacy budget of ``fit`` (replace-one neighbours).
        lam: regularization.
        loss: ``logistic``, ``huber_hinge``, ``hinge`` (output perturbation only) or ``squared``.
        mechanism: ``"output"`` or ``"objective"`` perturbation.
        radius: optional ||w|| <= R (required for ``squared``).
        clip: project rows outside the unit ball onto it.
        classes: the class labels, declared (public): a count C (labels 0, …, C − 1) or the label
            values in order (e.g. ``(-1, 1)``). Required for the classification losses; not used
            for ``squared``.
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
        classes: int | Sequence[float] | torch.Tensor | None = None,
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
        self.classes = None if classes is None else _declared_classes(classes)
        if self.classes is not None and get_loss(self.loss).task == "regression":
            raise ValueError(f"classes are for classification losses, not {self.loss!r}")

    def _fit_one(self, x: torch.Tensor, y: torch.Tensor, eps: float, gen: torch.Generator) -> PrivateLinearModel:
        fn = output_perturbation if self.mechanism == "output" else objective_perturbation
        return fn(x, y, epsilon=eps, lam=self.lam, generator=gen, loss=self.loss, radius=self.radius, clip=self.clip)

    def fit(self, x: object, y: object, *, generator: torch.Generator) -> PrivateLinearHead:
        """Fit on features ``x`` (n, d) and labels ``y``: values of the declared ``classes``, or targets.

        A declared class without a record in ``y`` still gets its head (every label −1 there).
        """
        gen = check_generator(generator)
        xt = check_tensor("x", x, ndim=2).to(_DTYPE)
        yt = check_tensor("y", y, ndim=1)
        if get_loss(self.loss).task == "regression":
            self.classes_ = None
            self.models_ = [self._fit_one(xt, yt.to(_DTYPE), self.epsilon, gen)]
            return self
        if self.classes is None:
            raise ValueError(
                "declare the classes (PrivateLinearHead(..., classes=C or the label values)): they are never read "
                "from the private labels, since they fix the number of heads, each head's ε and the weights' shape"
            )
        classes = self.classes.to(yt.dtype)
        known = (yt[:, None] == classes[None, :]).any(dim=1)
        if not bool(known.all()):
            i = int(torch.nonzero(~known)[0])
            raise ValueError(f"y[{i}] = {yt[i].item()} is not a declared class {classes.tolist()}")
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


def _declared_classes(classes: int | Sequence[float] | torch.Tensor) -> torch.Tensor:
    """The declared label values as a 1-d tensor: ``arange(C)`` for a count, else the values (distinct, ≥ 2)."""
    if isinstance(classes, bool):
        raise ValueError(f"classes must be a count or the label values, got {classes!r}")
    if isinstance(classes, int):
        values = torch.arange(classes)
    else:
        values = torch.as_tensor(classes)
        if values.dim() != 1:
            raise ValueError(
                f"classes must be a count or a 1-d sequence of label values, got shape {tuple(values.shape)}"
            )
    if values.numel() < 2 or values.unique().numel() != values.numel():
        raise ValueError(f"classes must be at least two distinct labels, got {values.tolist()}")
    return values

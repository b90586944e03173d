"""Model definitions of the teachers and students: logistic regression, small MLPs, PATE's small MNIST CNN.

Every model maps a batch of inputs to class logits (n, C); probabilities are their softmax
(for two classes, softmax of two logits is the sigmoid of their difference, so logistic
regression is ``ModelSpec("logistic", …, num_classes=2)``). Models are described by a
:class:`ModelSpec` so that a checkpoint can rebuild them from JSON, and initialised with
:func:`init_parameters` from an explicit generator — PyTorch's default initialisation
U(−1/√fan_in, 1/√fan_in) for every weight and bias (what ``nn.Linear`` / ``nn.Conv2d`` draw
from the global generator), drawn here from the teacher's own generator instead.

Heads on public features: the PCA fitted on the *public* pool only is the features stage's
(:class:`pate_stab.features.PublicFeatures`); teachers reduced to small heads on its output train
on a few dozen examples each, which is what makes k in the thousands possible (DESIGN.md, "Why k
must be large").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from pate_stab._checks import check_generator, check_int

__all__ = ["ModelSpec", "PateCNN", "build_model", "init_layout", "init_parameters"]


@dataclass(frozen=True)
class ModelSpec:
    """What a teacher is; enough to rebuild it (``ModelSpec(**json.load(f))``).

    Attributes:
        kind: "logistic" (one linear layer), "mlp" (linear–ReLU stacks) or "cnn" (:class:`PateCNN`).
        input_shape: shape of one input, e.g. (784,), (50,) or (1, 28, 28) for the CNN;
            "logistic" and "mlp" flatten their input.
        num_classes: C ≥ 2.
        hidden: MLP hidden widths, or the CNN's fully connected width(s).
        channels: the CNN's two convolution widths.
    """

    kind: Literal["logistic", "mlp", "cnn"]
    input_shape: tuple[int, ...]
    num_classes: int
    hidden: tuple[int, ...] = (64,)
    channels: tuple[int, int] = (64, 128)

    def __post_init__(self) -> None:
        if self.kind not in ("logistic", "mlp", "cnn"):
            raise ValueError(f"kind must be 'logistic', 'mlp' or 'cnn', got {self.kind!r}")
        object.__setattr__(self, "input_shape", tuple(int(s) for s in self.input_shape))
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "channels", tuple(int(c) for c in self.channels))
        check_int("num_classes", self.num_classes, minimum=2)
        if self.kind == "cnn" and len(self.input_shape) != 3:
            raise ValueError(f"the CNN needs input_shape (channels, height, width), got {self.input_shape}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PateCNN(nn.Module):
    """The small CNN PATE used for MNIST / SVHN (Papernot et al. 2017, Appendix; TF
    ``deep_cnn.py``): two 5×5 convolutions (64 and 128 filters, ReLU, 2×2 max-pooling) and
    fully connected ReLU layers before the C-way output. PATE's local response normalisation
    is left out (it does not change the architecture's capacity and does not vectorise)."""

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        num_classes: int,
        channels: tuple[int, int] = (64, 128),
        hidden: tuple[int, ...] = (384, 192),
    ):
        super().__init__()
        c, h, w = input_shape
        self.conv1 = nn.Conv2d(c, channels[0], 5, padding=2)
        self.conv2 = nn.Conv2d(channels[0], channels[1], 5, padding=2)
        self.pool = nn.MaxPool2d(2)
        flat = channels[1] * (h // 4) * (w // 4)
        self.head = _mlp(flat, hidden, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.pool(torch.relu(self.conv1(x)))  # (n, c1, h/2, w/2)
        x = self.pool(torch.relu(self.conv2(x)))  # (n, c2, h/4, w/4)
        return self.head(x.flatten(1))  # (n, C)


def _mlp(in_features: int, hidden: tuple[int, ...], num_classes: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = in_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def build_model(spec: ModelSpec) -> nn.Module:
    """A freshly constructed (not yet initialised from a generator) teacher network."""
    if spec.kind == "cnn":
        c, h, w = spec.input_shape
        return PateCNN((c, h, w), spec.num_classes, spec.channels, spec.hidden)
    in_features = math.prod(spec.input_shape)
    hidden = () if spec.kind == "logistic" else spec.hidden
    return nn.Sequential(nn.Flatten(), _mlp(in_features, hidden, spec.num_classes))


def init_layout(model: nn.Module) -> list[tuple[str, nn.Parameter, float]]:
    """``(name, parameter, bound)`` for every Linear / Conv2d weight and bias, in draw order.

    The order (module order, weight before bias) is the order in which :func:`init_parameters`
    draws from the generator; ``bound`` is 1/√fan_in of the parameter's layer.
    """
    layout = []
    for prefix, module in model.named_modules():
        if isinstance(module, nn.Linear | nn.Conv2d):
            bound = 1.0 / math.sqrt(module.weight[0].numel())
            for kind in ("weight", "bias"):
                p = getattr(module, kind)
                if p is not None:
                    layout.append((f"{prefix}.{kind}" if prefix else kind, p, bound))
    return layout


@torch.no_grad()
def init_parameters(model: nn.Module, *, generator: torch.Generator) -> nn.Module:
    """Draw every Linear / Conv2d weight and bias from U(−1/√fan_in, 1/√fan_in), in place.

    This is PyTorch's default initialisation for these layers (kaiming-uniform with a = √5 for
    the weight gives the same bound), drawn from ``generator`` in module order: each parameter
    is ``(2u − 1)·bound`` with ``u`` drawn in float64 by ``torch.rand``, then cast.
    """
    check_generator(generator)
    for _, p, bound in init_layout(model):
        draw = torch.rand(p.shape, generator=generator, dtype=torch.float64)
        p.copy_(draw.mul_(2).sub_(1).mul_(bound))
    return model

"""DP-SGD on the raw private images with Tramèr & Boneh 2021's end-to-end tanh CNN (the ``dpsgd-cnn`` learner).

Architecture (Tramèr & Boneh 2021, "Differentially Private Learning Needs Better Features (or
Much More Data)", ICLR 2021, their end-to-end CNN for MNIST and Fashion-MNIST; code
``ftramer/Handcrafted-DP``, ``models.py``: ``MNIST_CNN``, after Papernot et al. 2020's
tempered-sigmoid network): conv 16 filters 8×8, stride 2, padding 2 → tanh → max-pool 2×2,
stride 1 → conv 32 filters 4×4, stride 2 → tanh → max-pool 2×2, stride 1 → linear 32 → tanh →
linear C. On 28 × 28 images the flattened map is 32 × 4 × 4 = 512, as theirs; other image sizes
get the map the same layers give (at least 16 × 16 pixels: :data:`MIN_SIDE`), and C input
channels (theirs: 1). The network has no normalisation layer, so nothing needs Opacus's
``ModuleValidator.fix`` (BatchNorm would; :func:`check_opacus_compatible` checks). Inputs are the
pixels in [0, 1] as loaded (their ``transforms.ToTensor()``, no further normalisation).

Training: :func:`pate_stab.direct.opacus_engine.train_dpsgd_module` — Poisson sampling, per-sample
clipping, Gaussian noise, σ from Opacus's RDP accountant for the target (ε, δ), add/remove
neighbours; SGD with momentum.

Settings (:data:`CNN_DPSGD`), from their README's "End-to-end CNNs" commands (target ε = 3,
δ = 1e-5; the noise multiplier chosen to spend the budget in 40 epochs) and their ``cnns.py``
defaults (momentum 0.9, ``max_grad_norm`` 0.1):

* MNIST: expected batch 512, learning rate 0.5, 40 epochs, momentum 0.9, clipping norm 0.1;
* Fashion-MNIST: expected batch 2048, learning rate 4, 40 epochs, momentum 0.9, clipping norm 0.1.

Other image data (own image folders or arrays, SVHN, CIFAR-10) have no setting of theirs for
this network; they take MNIST's, fixed in advance here (their CIFAR-10 network is another one).
Where they differ from the paper: the batches are Poisson samples at q = 1 / ⌈N / B⌉ (Opacus's
loader rule on the public size N, never the actual count), theirs shuffled batches of B accounted
at q = B / n; σ is computed for the run's (ε, δ) rather than theirs for ε = 3; the number of
epochs may be reduced by the run's ``dpsgd_cnn_epochs`` (a setting fixed before the run, recorded with the spend).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from pate_stab.direct.dpsgd import DPSGDConfig
from pate_stab.direct.opacus_engine import DPSGDModule, train_dpsgd_module

__all__ = [
    "CNN_DPSGD",
    "DEFAULT_CNN_DPSGD",
    "MIN_SIDE",
    "TanhCNN",
    "as_images",
    "check_opacus_compatible",
    "cnn_dpsgd_config",
    "cnn_from_state",
    "cnn_predict",
    "cnn_state",
    "resolve_device",
    "train_dpsgd_cnn",
]

CNN_DPSGD = {
    "mnist": DPSGDConfig(expected_batch_size=512, epochs=40, lr=0.5, momentum=0.9, max_grad_norm=0.1),
    "fashion_mnist": DPSGDConfig(expected_batch_size=2048, epochs=40, lr=4.0, momentum=0.9, max_grad_norm=0.1),
}
"""Tramèr & Boneh 2021's end-to-end CNN settings per data set (module docstring)."""
DEFAULT_CNN_DPSGD = CNN_DPSGD["mnist"]
"""Other image data: MNIST's settings, fixed in advance (the paper has none for them)."""
MIN_SIDE = 16
"""The smallest image side the layers accept (both pooled maps at least 1 × 1)."""
ARCHITECTURE = (
    "Tramèr & Boneh 2021 end-to-end CNN (ftramer/Handcrafted-DP models.py MNIST_CNN): conv16 8x8/2 pad 2, tanh, "
    "maxpool 2/1, conv32 4x4/2, tanh, maxpool 2/1, linear 32, tanh, linear C"
)


def _side(size: int) -> int:
    """The side of the last pooled map for an input side ``size`` (the layers' arithmetic)."""
    s = (size + 2 * 2 - 8) // 2 + 1 - 1  # conv 8×8 stride 2 padding 2, pool 2 stride 1
    return (s - 4) // 2 + 1 - 1  # conv 4×4 stride 2, pool 2 stride 1


class TanhCNN(nn.Module):
    """Tramèr & Boneh 2021's end-to-end CNN (module docstring) for images of shape ``in_shape`` = (C, H, W)."""

    def __init__(self, in_shape: tuple[int, int, int], num_classes: int) -> None:
        super().__init__()
        c, h, w = (int(v) for v in in_shape)
        if min(h, w) < MIN_SIDE:
            raise ValueError(f"the CNN needs images of at least {MIN_SIDE} x {MIN_SIDE} pixels, got {h} x {w}")
        self.in_shape = (c, h, w)
        self.features = nn.Sequential(
            nn.Conv2d(c, 16, kernel_size=8, stride=2, padding=2), nn.Tanh(), nn.MaxPool2d(2, stride=1),
            nn.Conv2d(16, 32, kernel_size=4, stride=2), nn.Tanh(), nn.MaxPool2d(2, stride=1),
        )  # fmt: skip
        flat = 32 * _side(h) * _side(w)
        self.classifier = nn.Sequential(nn.Linear(flat, 32), nn.Tanh(), nn.Linear(32, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))


def check_opacus_compatible(module: nn.Module) -> None:
    """Raise ValueError if Opacus's ``ModuleValidator`` finds a layer DP-SGD cannot train (e.g. BatchNorm)."""
    from opacus.validators import ModuleValidator

    errors = ModuleValidator.validate(module, strict=False)
    if errors:
        raise ValueError(f"the network has layers Opacus cannot train privately: {errors}")


def as_images(x: Tensor | None, *, name: str = "images") -> Tensor:
    """``x`` as an (n, C, H, W) float32 batch ((n, H, W) gains one channel); ValueError otherwise."""
    if not isinstance(x, Tensor) or x.dim() not in (3, 4):
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"the {name} must be images (n, C, H, W) or (n, H, W), got {shape}")
    x = x.unsqueeze(1) if x.dim() == 3 else x
    if min(x.shape[2], x.shape[3]) < MIN_SIDE:
        raise ValueError(
            f"the {name} are {x.shape[2]} x {x.shape[3]} pixels; the CNN needs at least {MIN_SIDE} x {MIN_SIDE}"
        )
    if x.shape[0] and not bool(torch.isfinite(x).all()):
        raise ValueError(f"the {name} contain NaN or infinite values")
    return x.float()


def cnn_dpsgd_config(dataset: str, epochs: int | None = None) -> DPSGDConfig:
    """The settings for ``dataset`` (:data:`CNN_DPSGD`, else :data:`DEFAULT_CNN_DPSGD`); ``epochs`` replaces theirs."""
    config = CNN_DPSGD.get(dataset, DEFAULT_CNN_DPSGD)
    return config if epochs is None else replace(config, epochs=epochs)


def resolve_device(accelerator: str) -> torch.device:
    """The torch device for a run's ``accelerator`` (Lightning's names: auto, cpu, gpu / cuda, mps).

    Raises:
        ValueError: an unknown name, or a GPU asked for where none is available.
    """
    name = str(accelerator).lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name in ("gpu", "cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"accelerator {accelerator!r} asks for a GPU and torch sees none")
        return torch.device("cuda")
    if name == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError("accelerator 'mps' is not available")
        return torch.device("mps")
    raise ValueError(f"the CNN learner runs on accelerator auto, cpu, gpu / cuda or mps, got {accelerator!r}")


def train_dpsgd_cnn(
    images: Tensor,
    labels: Tensor,
    *,
    num_classes: int,
    epsilon: float,
    delta: float,
    generator: torch.Generator,
    config: DPSGDConfig,
    public_size: int,
    device: torch.device | str = "cpu",
    secure_mode: bool = False,
) -> DPSGDModule:
    """Train :class:`TanhCNN` on (images, labels) by DP-SGD at (ε, δ) (add/remove one record).

    ``public_size``: N, the private set's public size; the sampling rate, the steps, σ and the
    divisor come from it, never from the number of images (:mod:`pate_stab.direct.dpsgd`).

    The initial weights are drawn from a seed taken from ``generator`` (no private data); the
    Poisson batches and the noise come from ``generator`` too (a GPU noise generator is seeded
    from it, :func:`~pate_stab.direct.opacus_engine.train_dpsgd_module`); ``secure_mode``: Opacus's
    noise against floating-point attacks.

    Raises:
        ValueError: inputs that are not images of at least :data:`MIN_SIDE` pixels a side, NaN,
            labels outside [0, C), N smaller than the expected batch, ε ≤ 0, δ outside (0, 1).
    """
    x = as_images(images, name="private images")
    in_shape = (int(x.shape[1]), int(x.shape[2]), int(x.shape[3]))
    init_seed = int(torch.randint(0, 2**62, (1,), generator=generator))

    def make() -> nn.Module:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            module = TanhCNN(in_shape, num_classes)
        check_opacus_compatible(module)
        return module

    return train_dpsgd_module(make, x, labels, num_classes=num_classes, epsilon=epsilon, delta=delta,
                              generator=generator, config=config, public_size=public_size,
                              device=device, secure_mode=secure_mode)  # fmt: skip


def cnn_state(trained: DPSGDModule, num_classes: int) -> dict[str, Any]:
    """What a ``dpsgd-cnn`` spend saves: plain tensors and numbers (``torch.load(weights_only=True)``)."""
    module = trained.module
    if not isinstance(module, TanhCNN):
        raise TypeError(f"expected a TanhCNN, got {type(module).__name__}")
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    return {"kind": "cnn", "in_shape": list(module.in_shape), "num_classes": num_classes, "state": state,
            "epsilon": trained.epsilon}  # fmt: skip


def cnn_from_state(model: dict[str, Any]) -> TanhCNN:
    """The network :func:`cnn_state` saved."""
    c, h, w = (int(v) for v in model["in_shape"])
    module = TanhCNN((c, h, w), int(model["num_classes"]))
    module.load_state_dict(model["state"])
    return module.eval()


@torch.no_grad()
def cnn_predict(model: dict[str, Any], images: Tensor, *, device: torch.device | str = "cpu",
                batch_size: int = 2048) -> Tensor:  # fmt: skip
    """Predicted classes (int64, on the CPU) of the saved network on ``images``, in batches."""
    x = as_images(images)
    module = cnn_from_state(model).to(device)
    out = [module(x[i : i + batch_size].to(device)).argmax(1).cpu() for i in range(0, x.shape[0], batch_size)]
    return torch.cat(out) if out else torch.empty(0, dtype=torch.int64)

"""Self-supervised CNN features learned on the public pool only (SimCLR, NT-Xent loss).

Chen, Kornblith, Norouzi & Hinton (2020), "A simple framework for contrastive learning of
visual representations" (SimCLR), Algorithm 1: two random augmentations of every image in a
batch of B, a shared encoder f and projection head g, and the normalised-temperature
cross-entropy (NT-Xent) loss that asks each view to pick its partner among the other 2B − 1.
After training, g is dropped and the encoder output h = f(x) is the feature.

The encoder sees the *public* images only and no labels; once frozen it is a fixed map applied
to private inputs, so it costs no privacy. Everything random — initialisation, data order,
augmentations — is drawn from the generator handed in, and training is checkpointed after
every epoch with that generator's state, so an interrupted run resumes to the same result.

Augmentations (per view, drawn independently): a random affine map (rotation, scale, shear,
translation by a few pixels, i.e. random shifts/crops), a cutout square with probability
``cutout_prob`` and additive Gaussian pixel noise; sized for 28×28 digits.

On a GPU (``device``) the public images move there once, whole, and every batch is a slice of them
there; the encoder trains and encodes there. The augmentations' parameters (a few numbers an image)
still come from the CPU generator, so that the stream of draws is the CPU run's; the pixel noise, an
image-sized draw per view, comes from a generator on the device seeded from the CPU generator at
the start of every epoch (a checkpoint therefore resumes to the same result there too). On the CPU
nothing changes: every draw, pixel noise included, comes from the CPU generator.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pate_stab._checks import (
    check_generator,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
    check_tensor,
)

__all__ = ["SSLConfig", "ConvEncoder", "augment", "nt_xent_loss", "train_ssl_encoder", "encode"]


@dataclass(frozen=True)
class SSLConfig:
    """Encoder size and SimCLR training settings (defaults sized for one CPU core on MNIST).

    Attributes:
        width: channels of the first convolution block; later blocks use 2× and 4×.
        embed_dim: encoder output dimension (the feature).
        proj_dim: projection-head output (used by the loss only).
        epochs: passes over the public images.
        batch_size: B images per step (2B views).
        lr: peak Adam learning rate; cosine decay to 0 over all steps.
        weight_decay: decoupled weight decay (AdamW).
        temperature: τ of NT-Xent (SimCLR uses 0.1–0.5).
        max_rotation: degrees; max_shift: pixels; scale_range: ± relative; max_shear: degrees.
        cutout_size / cutout_prob: side of the zeroed square and how often it is applied.
        noise_std: standard deviation of the additive pixel noise.
    """

    width: int = 32
    embed_dim: int = 128
    proj_dim: int = 64
    epochs: int = 30
    batch_size: int = 256
    lr: float = 2e-3
    weight_decay: float = 1e-4
    temperature: float = 0.2
    max_rotation: float = 15.0
    max_shift: float = 3.0
    scale_range: float = 0.15
    max_shear: float = 10.0
    cutout_size: int = 10
    cutout_prob: float = 0.5
    noise_std: float = 0.1

    def __post_init__(self) -> None:
        for name in ("width", "embed_dim", "proj_dim", "epochs", "batch_size"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("batch_size", self.batch_size, minimum=2)
        check_int("cutout_size", self.cutout_size, minimum=0)
        for name in ("lr", "temperature"):
            check_positive(name, getattr(self, name))
        for name in ("weight_decay", "max_rotation", "max_shift", "max_shear", "noise_std"):
            check_nonnegative(name, getattr(self, name))
        check_probability("scale_range", self.scale_range, open_interval=False)
        check_probability("cutout_prob", self.cutout_prob)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class ConvEncoder(nn.Module):
    """Three conv–BN–ReLU blocks (width, 2·width, 4·width) with 2×2 max-pooling between them,
    global average pooling and a linear map to ``embed_dim``."""

    def __init__(self, in_channels: int, *, width: int, embed_dim: int) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _block(in_channels, width),
            nn.MaxPool2d(2),  # 28 → 14
            _block(width, 2 * width),
            nn.MaxPool2d(2),  # 14 → 7
            _block(2 * width, 4 * width),
            nn.AdaptiveAvgPool2d(1),
        )
        self.out = nn.Linear(4 * width, embed_dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.features(x).flatten(1))  # (n, embed_dim)


def _projection_head(embed_dim: int, proj_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.ReLU(), nn.Linear(embed_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, proj_dim))


def _uniform(n: int, bound: float, generator: torch.Generator) -> Tensor:
    return (torch.rand(n, generator=generator) * 2 - 1) * bound


def augment(
    x: Tensor, config: SSLConfig, *, generator: torch.Generator, noise_generator: torch.Generator | None = None
) -> Tensor:
    """One random view of every image (n, C, H, W), drawn from ``generator`` (a CPU generator).

    The view is computed on ``x``'s device; the per-image parameters are drawn on the CPU and moved
    there. The pixel noise is drawn from ``noise_generator`` (a generator on ``x``'s device; None:
    ``generator``, which requires ``x`` on the CPU).
    """
    n, _, h, w = x.shape
    device = x.device
    angle = torch.deg2rad(_uniform(n, config.max_rotation, generator))
    shear = torch.deg2rad(_uniform(n, config.max_shear, generator))
    scale = 1 + _uniform(n, config.scale_range, generator)
    shift = _uniform(2 * n, config.max_shift, generator).view(n, 2) * torch.tensor([2 / w, 2 / h])
    cos, sin = torch.cos(angle), torch.sin(angle)
    # output → input sampling map: rotation · shear, divided by scale, plus translation
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 0, 1] = cos / scale, (-sin + cos * torch.tan(shear)) / scale
    theta[:, 1, 0], theta[:, 1, 1] = sin / scale, (cos + sin * torch.tan(shear)) / scale
    theta[:, :, 2] = shift
    grid = F.affine_grid(theta.to(device), list(x.shape), align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    if config.cutout_size and config.cutout_prob > 0:
        cy = torch.randint(0, h, (n,), generator=generator)
        cx = torch.randint(0, w, (n,), generator=generator)
        apply = torch.rand(n, generator=generator) < config.cutout_prob
        cy, cx, apply = cy.to(device), cx.to(device), apply.to(device)
        half = config.cutout_size // 2
        rows, cols = torch.arange(h, device=device)[None, :, None], torch.arange(w, device=device)[None, None, :]
        box = ((rows - cy[:, None, None]).abs() <= half) & ((cols - cx[:, None, None]).abs() <= half)
        out = out * ~(box & apply[:, None, None])[:, None]
    if config.noise_std > 0:
        noise = generator if noise_generator is None else noise_generator
        out = out + config.noise_std * torch.randn(out.shape, generator=noise, device=device)
    return out


def nt_xent_loss(z1: Tensor, z2: Tensor, *, temperature: float) -> Tensor:
    """SimCLR's NT-Xent loss (Chen et al. 2020, Eq. 1 averaged over all 2B views).

    Args:
        z1, z2: projections of the two views, (B, d); row i of z1 and z2 is a positive pair.
        temperature: τ > 0.
    """
    b = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)  # (2B, d)
    sim = z @ z.T / temperature  # (2B, 2B)
    sim = sim.masked_fill(torch.eye(2 * b, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(b, 2 * b, device=z.device), torch.arange(0, b, device=z.device)])
    return F.cross_entropy(sim, target)


def _init_modules(modules: list[nn.Module], generator: torch.Generator) -> None:
    """Kaiming-normal convolutions, default-bounded uniform linear layers, drawn from ``generator``."""
    with torch.no_grad():
        for module in modules:
            for m in module.modules():
                if isinstance(m, nn.Conv2d):
                    fan_in = m.weight[0].numel()
                    m.weight.copy_(torch.randn(m.weight.shape, generator=generator) * math.sqrt(2 / fan_in))
                elif isinstance(m, nn.Linear):
                    bound = 1 / math.sqrt(m.in_features)
                    m.weight.copy_((torch.rand(m.weight.shape, generator=generator) * 2 - 1) * bound)
                    m.bias.copy_((torch.rand(m.bias.shape, generator=generator) * 2 - 1) * bound)


def _learning_rate(config: SSLConfig, step: int, total: int) -> float:
    return config.lr * 0.5 * (1 + math.cos(math.pi * step / total))


def train_ssl_encoder(
    public_x: Tensor,
    config: SSLConfig,
    *,
    generator: torch.Generator,
    checkpoint: str | Path | None = None,
    progress: bool = False,
    device: str | torch.device = "cpu",
) -> tuple[ConvEncoder, list[float]]:
    """Train a :class:`ConvEncoder` with SimCLR on the public images only.

    Args:
        public_x: public images (n, C, H, W) float in [0, 1]; never private data.
        config: encoder size and training settings.
        generator: source of all randomness (initialisation, order, augmentations).
        checkpoint: file written after every epoch (encoder, head, optimiser, generator state,
            loss history); if it exists, training resumes from it.
        progress: show a tqdm bar over steps.
        device: where the encoder trains (the images move there once, whole).

    Returns:
        The trained encoder in eval mode (on ``device``), and the mean training loss of every epoch.

    Raises:
        ValueError: a checkpoint written with another configuration or for other data size.
    """
    check_generator(generator)
    x = check_tensor("public_x", public_x, ndim=4, floating=True).float()
    n = x.shape[0]
    if n < 2:
        raise ValueError(f"public_x needs at least 2 images, got {n}")
    batch = min(config.batch_size, n)
    steps_per_epoch = n // batch  # the last incomplete batch is dropped
    total = config.epochs * steps_per_epoch
    encoder = ConvEncoder(x.shape[1], width=config.width, embed_dim=config.embed_dim)
    head = _projection_head(config.embed_dim, config.proj_dim)
    _init_modules([encoder, head], generator)  # drawn on the CPU, then moved
    x, encoder, head = x.to(device), encoder.to(device), head.to(device)  # the whole public set, once
    params = list(encoder.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    path = Path(checkpoint) if checkpoint is not None else None
    modules = {"encoder": encoder, "head": head, "optimizer": optimizer}
    history = _resume(path, config, n, modules, generator) if path is not None and path.is_file() else []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=len(history) * steps_per_epoch, desc="ssl", unit="step")
    for epoch in range(len(history), config.epochs):
        encoder.train()
        head.train()
        order = torch.randperm(n, generator=generator).to(x.device)
        noise = None
        if x.device.type != "cpu":  # the pixel noise drawn on the device, seeded from the CPU generator
            noise = torch.Generator(device=x.device)
            noise.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
        losses = []
        for s in range(steps_per_epoch):
            xb = x[order[s * batch : (s + 1) * batch]]
            v1 = augment(xb, config, generator=generator, noise_generator=noise)
            v2 = augment(xb, config, generator=generator, noise_generator=noise)
            z = head(encoder(torch.cat([v1, v2])))  # (2B, proj_dim)
            loss = nt_xent_loss(z[:batch], z[batch:], temperature=config.temperature)
            for group in optimizer.param_groups:
                group["lr"] = _learning_rate(config, epoch * steps_per_epoch + s, total)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())  # read once an epoch (no device sync per step)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}")
        epoch_losses = torch.stack(losses).tolist()
        history.append(sum(epoch_losses) / len(epoch_losses))
        if path is not None:
            _save_checkpoint(path, config, n, modules, generator, history)
    if bar is not None:
        bar.close()
    encoder.eval()
    return encoder, history


def _resume(path: Path, config: SSLConfig, n: int, modules: dict[str, Any], generator: torch.Generator) -> list[float]:
    """Load a checkpoint of :func:`train_ssl_encoder` into ``modules`` and ``generator``; its loss history."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state["config"] != config.to_dict() or state["num_images"] != n:
        raise ValueError(f"{path} was written for another configuration or data size; remove it to retrain")
    for name, module in modules.items():
        module.load_state_dict(state[name])
    generator.set_state(state["generator"])
    return list(state["history"])


def _save_checkpoint(
    path: Path, config: SSLConfig, n: int, modules: dict[str, Any], generator: torch.Generator, history: list[float]
) -> None:
    """Write the checkpoint after an epoch (to a temporary file, then renamed: never half written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    state = {"config": config.to_dict(), "num_images": n}
    state |= {name: module.state_dict() for name, module in modules.items()}
    state |= {"generator": generator.get_state(), "history": history}
    torch.save(state, tmp)
    tmp.replace(path)


@torch.no_grad()
def encode(
    encoder: ConvEncoder,
    x: Tensor,
    *,
    batch_size: int = 1024,
    progress: bool = False,
    device: str | torch.device | None = None,
) -> Tensor:
    """The frozen encoder's embedding of every image, (n, embed_dim) float32, in eval mode
    (batch-norm uses its running statistics, so each row depends only on its own image).

    Computed on ``device`` (None: the encoder's), where the encoder must be: ``x`` moves there once,
    whole, and the embedding stays there.
    """
    encoder.eval()
    x = x.to(next(encoder.parameters()).device if device is None else device)
    out = []
    starts = range(0, x.shape[0], batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="encode", unit="batch")
    for start in starts:
        out.append(encoder(x[start : start + batch_size].float()))
    return torch.cat(out)

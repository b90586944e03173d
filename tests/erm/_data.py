"""Small synthetic datasets for the erm tests."""

from __future__ import annotations

import torch


def classification(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    x = x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp(min=1.0)
    w = torch.randn(d, generator=g, dtype=torch.float64)
    y = torch.where(x @ w + 0.3 * torch.randn(n, generator=g, dtype=torch.float64) > 0, 1.0, -1.0)
    return x, y


def regression(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, _ = classification(n, d, seed)
    g = torch.Generator().manual_seed(seed + 1)
    w = torch.randn(d, generator=g, dtype=torch.float64) / d**0.5
    y = (x @ w + 0.1 * torch.randn(n, generator=g, dtype=torch.float64)).clamp(-1, 1)
    return x, y


def neighbour(x: torch.Tensor, y: torch.Tensor, seed: int, *, regression: bool = False):
    """Replace one random record by a random record satisfying the contract."""
    g = torch.Generator().manual_seed(seed)
    n, d = x.shape
    i = int(torch.randint(0, n, (1,), generator=g))
    x2, y2 = x.clone(), y.clone()
    v = torch.randn(d, generator=g, dtype=torch.float64)
    x2[i] = v / torch.linalg.vector_norm(v) * float(torch.rand(1, generator=g, dtype=torch.float64))
    if regression:
        y2[i] = 2 * float(torch.rand(1, generator=g, dtype=torch.float64)) - 1
    else:
        y2[i] = -y[i]
    return x2, y2

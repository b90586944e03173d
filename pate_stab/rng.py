"""Random generators: seeded (reproducible research) and seeded from the OS (deployment).

Library code never seeds globally; every function that draws takes ``generator=``. Recipes seed
once with :func:`seeded_generator` and hand independent children to each stage with
:func:`spawn_generators` (partition, teachers, noise, student).

A seeded generator makes every release reproducible from the seed, which is what research
needs and exactly what a deployment must avoid: whoever knows the seed can subtract the noise.
:func:`os_seeded_generator` draws the seed from the operating system's CSPRNG and never
stores it. Never write generator state into a checkpoint that is released.
"""

from __future__ import annotations

import secrets

import torch

from pate_stab._checks import check_generator, check_int

__all__ = ["seeded_generator", "os_seeded_generator", "spawn_generators", "child_seed"]

_SEED_BOUND = 2**63 - 1


def seeded_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A generator seeded with ``seed`` (for reproducible research runs)."""
    seed = check_int("seed", seed, minimum=0)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return gen


def os_seeded_generator(device: str | torch.device = "cpu") -> torch.Generator:
    """A generator seeded from the OS's CSPRNG; the seed is not kept anywhere."""
    gen = torch.Generator(device=device)
    gen.manual_seed(secrets.randbits(63))
    return gen


def child_seed(generator: torch.Generator) -> int:
    """Draw one seed for a child generator from ``generator``."""
    check_generator(generator)
    return int(torch.randint(0, _SEED_BOUND, (1,), generator=generator, device=generator.device).item())


def spawn_generators(generator: torch.Generator, n: int) -> list[torch.Generator]:
    """``n`` child generators whose seeds are drawn from ``generator`` (deterministic given it)."""
    n = check_int("n", n, minimum=1)
    out = []
    for _ in range(n):
        child = torch.Generator(device=generator.device)
        child.manual_seed(child_seed(generator))
        out.append(child)
    return out

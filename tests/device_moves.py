"""Record host→device moves on a machine without a GPU (a test helper).

:func:`fake_cuda_moves` makes ``torch.cuda.is_available()`` true and replaces ``Tensor.to`` (and
``Tensor.cuda``) so that a move to a CUDA device is recorded (the tensor's shape) and leaves the
tensor where it is, on the CPU. Code that sends its data to the run's GPU then runs to the end on the
CPU, and a test can read which tensors were sent and how often: a stage that stays on the CPU sends
nothing, a stage that copies per batch sends one slice per batch, a stage that moves whole tensors
once sends each once. Module moves (``nn.Module.to``) go through ``Tensor.to`` and are recorded too.

A move returns a copy (on the CPU) whose storage is marked as being on the device: a later move of
it, or of a view of it, is not recorded (on a GPU that move is a no-op), while moving the original
CPU tensor again is (on a GPU it copies again). Rows indexed from a marked tensor (``x[index]``) are
marked too; any other tensor computed from it is a new, unmarked CPU tensor here, so code that sends
such a tensor to the device again by name is counted: it must take the device from its input
(``x.device``) instead, as is natural on a GPU too. A tensor created with ``device="cuda"`` outright
fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

_to = torch.Tensor.to
_getitem = torch.Tensor.__getitem__


class _NotCapturing:
    """The stand-in device's current stream, as torch.optim sees it: never capturing a graph."""

    def is_capturing(self) -> bool:
        return False


class Moves:
    """The shapes of the tensors sent to CUDA, in order."""

    def __init__(self) -> None:
        self.shapes: list[tuple[int, ...]] = []

    def count(self, shape: tuple[int, ...]) -> int:
        return sum(s == tuple(shape) for s in self.shapes)

    def with_trailing(self, trailing: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The moved shapes whose last dimensions are ``trailing`` (e.g. one image's shape)."""
        n = len(trailing)
        return [s for s in self.shapes if len(s) > n and s[-n:] == tuple(trailing)]


def fake_cuda_moves(monkeypatch: pytest.MonkeyPatch) -> Moves:
    """Install the replacement for the rest of the test; returns the record."""
    moves = Moves()
    on_device: set[int] = set()  # storages of the stand-in device copies (by data pointer)

    def send(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr and ptr in on_device:  # already on the device: no move
            return t if dtype is None or dtype == t.dtype else _to(t, dtype=dtype)
        moves.shapes.append(tuple(t.shape))
        out = _to(t, dtype=dtype or t.dtype, copy=True)  # the device copy: a new CPU tensor, marked
        if out.untyped_storage().data_ptr():
            on_device.add(out.untyped_storage().data_ptr())
        return out

    def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if args and isinstance(args[0], torch.Tensor):  # .to(other): that tensor's device and dtype
            return _to(self, *args, **kwargs)
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if device is None or device.type != "cuda":
            return _to(self, *args, **kwargs)
        return send(self, dtype)

    def cuda(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return send(self)

    def getitem(self: torch.Tensor, index: Any) -> torch.Tensor:
        out = _getitem(self, index)  # rows gathered from a tensor on the device are on the device
        ptr = self.untyped_storage().data_ptr()
        if ptr and ptr in on_device and isinstance(out, torch.Tensor) and out.untyped_storage().data_ptr():
            on_device.add(out.untyped_storage().data_ptr())
        return out

    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    # asked by torch.optim's step() whenever CUDA is available (as in tests/as_if_cuda/sitecustomize.py)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "current_stream"):
        monkeypatch.setattr(torch.accelerator, "current_stream", lambda device=None: _NotCapturing())
    monkeypatch.setattr(torch.Tensor, "to", to)
    monkeypatch.setattr(torch.Tensor, "cuda", cuda)
    monkeypatch.setattr(torch.Tensor, "__getitem__", getitem)
    return moves

"""Make this process look as if it had one CUDA device (a test mode, never used by the package).

Imported by Python at start-up when this folder is on ``PYTHONPATH`` (the test suite's
``--as-if-cuda`` mode puts it there for the subprocesses it starts) and by ``tests/conftest.py``
for the pytest process itself. With ``PATE_STAB_AS_IF_CUDA=1`` it replaces
``torch.cuda.is_available`` (True) and ``torch.cuda.device_count`` (1), which is what
``accelerator: auto`` reads, in torch (``pate_stab.direct.cnn.resolve_device``) and in Lightning
(``lightning.fabric.accelerators.cuda.num_cuda_devices``). Nothing can actually run on that
device: code that picks it fails at its first CUDA call. A test that passes in this mode
therefore does not depend on ``auto`` finding no GPU, which is the behaviour of the suite on a
machine with CUDA (where ``auto`` picks the GPU and, for example, results are no longer
bit-identical to a CPU run).
"""

from __future__ import annotations

import os

ENV = "PATE_STAB_AS_IF_CUDA"


class _NotCapturing:
    """The stand-in device's current stream, as torch.optim sees it: never capturing a graph."""

    def is_capturing(self) -> bool:
        return False


def install() -> bool:
    """Apply the replacement when ``PATE_STAB_AS_IF_CUDA=1``; returns whether it was applied."""
    if os.environ.get(ENV) != "1":
        return False
    import torch

    torch.cuda.is_available = lambda: True  # type: ignore[assignment]
    torch.cuda.device_count = lambda: 1  # type: ignore[assignment]
    # asked by torch.optim's step() whenever CUDA is available (a CPU optimiser included): not capturing
    # (torch 2.11 asks torch.cuda, later releases the current accelerator's stream)
    torch.cuda.is_current_stream_capturing = lambda: False  # type: ignore[assignment]
    if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "current_stream"):
        torch.accelerator.current_stream = lambda device=None: _NotCapturing()  # type: ignore[assignment]
    return True


install()

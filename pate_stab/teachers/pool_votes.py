"""The teachers' votes on the public pool, computed only for the points a release asks about.

Query selection (:mod:`pate_stab.selection`) must never see the votes on a point before the
releaser processes it. :class:`PoolVotes` holds no votes up front: a point's votes are computed
the first time a release asks for them — which the pipeline does immediately before handing them
to the releaser — and kept for later releases of the same run (each of which asks for them
again only when its own releaser processes the point). ``requested`` records which points have
been asked for, so a test can check that no other point's votes were ever computed.

On a GPU (``device``) the pool moves there once, whole, and each request indexes it there; the
teachers run where their input is (:class:`~pate_stab.teachers.TeacherEnsemble` keeps its weights
on that device after the first request) and only the requested votes come back to the CPU.
"""

from __future__ import annotations

import time
from typing import Protocol

import torch
from torch import Tensor

from pate_stab._checks import check_tensor
from pate_stab.aggregation.votes import vote_histogram

__all__ = ["PoolVotes", "VotingTeachers"]


class VotingTeachers(Protocol):
    """What :class:`PoolVotes` needs of an ensemble: trained heads
    (:class:`~pate_stab.teachers.TeacherEnsemble`) or propagation teachers
    (:class:`~pate_stab.teachers.PropagationTeachers`)."""

    @property
    def num_teachers(self) -> int: ...

    def predict_votes(self, x: Tensor, *, progress: bool = False, device: str | torch.device | None = None) -> Tensor:
        """(k, m) int64 on the CPU, computed on ``device`` (where ``x`` is)."""
        ...

    def predict_scores(
        self, x: Tensor, *, binary: bool = False, progress: bool = False, device: str | torch.device | None = None
    ) -> Tensor:
        """(k, m, C) (or (k, m) with ``binary``) float32 on the CPU, computed on ``device``."""
        ...


class PoolVotes:
    """Lazily computed vote histograms (hard labels) and class-1 scores (binary soft labels).

    Args:
        teachers: the ensemble (anything with ``num_teachers``, ``predict_votes``, ``predict_scores``).
        pool_x: (n, …) the public pool, in the teachers' input space.
        num_classes: C.
        progress: show a tqdm bar while votes are computed (see
            :func:`pate_stab.run.progress.default_progress`).
        device: where the votes are computed (the pool is moved there once).
    """

    def __init__(
        self,
        teachers: VotingTeachers,
        pool_x: Tensor,
        num_classes: int,
        *,
        progress: bool = False,
        device: str | torch.device = "cpu",
    ) -> None:
        self.teachers = teachers
        self.progress = progress
        self._device = torch.device(device)
        self.pool_x = pool_x.to(self._device)  # once, whole
        self.num_classes = num_classes
        n = pool_x.shape[0]
        self._hist = torch.zeros(n, num_classes, dtype=torch.int64)
        self._have_hist = torch.zeros(n, dtype=torch.bool)
        self._scores: Tensor | None = None  # (k, n) float32, allocated on the first request
        self._have_scores = torch.zeros(n, dtype=torch.bool)
        self.seconds = 0.0

    @property
    def size(self) -> int:
        return int(self.pool_x.shape[0])

    @property
    def device(self) -> str:
        """The device type the votes are computed on (for the run's stage line)."""
        return self._device.type

    @property
    def requested(self) -> Tensor:
        """(n,) bool: points whose votes (or scores) have been computed."""
        return self._have_hist | self._have_scores

    def _check(self, index: Tensor) -> Tensor:
        index = check_tensor("index", index, ndim=1, floating=False)
        if bool(((index < 0) | (index >= self.size)).any()):
            raise IndexError(f"pool positions must lie in [0, {self.size})")
        return index.to(torch.int64)

    def _rows(self, index: Tensor) -> Tensor:
        """The pool rows ``index``, gathered where the pool is."""
        return self.pool_x[index.to(self._device)]

    @staticmethod
    def _missing(index: Tensor, have: Tensor) -> Tensor:
        """Positions of ``index`` not computed yet, once each, in order of first appearance."""
        return torch.tensor(list(dict.fromkeys(index[~have[index]].tolist())), dtype=torch.int64)

    def histograms(self, index: Tensor) -> Tensor:
        """Vote histograms (b, C) int64 of the pool points ``index`` (computed if not yet)."""
        index = self._check(index)
        missing = self._missing(index, self._have_hist)
        if missing.numel():
            t0 = time.perf_counter()
            votes = self.teachers.predict_votes(
                self._rows(missing), progress=self.progress, device=self._device
            )  # (k, b)
            self._hist[missing] = vote_histogram(votes, self.num_classes)
            self._have_hist[missing] = True
            self.seconds += time.perf_counter() - t0
        return self._hist[index]

    def scores(self, index: Tensor) -> Tensor:
        """Each teacher's probability of class 1, (k, b) float32 (binary tasks only)."""
        if self.num_classes != 2:
            raise ValueError("scores are for binary tasks (the soft-label releaser)")
        index = self._check(index)
        if self._scores is None:
            self._scores = torch.zeros(self.teachers.num_teachers, self.size, dtype=torch.float32)
        missing = self._missing(index, self._have_scores)
        if missing.numel():
            t0 = time.perf_counter()
            self._scores[:, missing] = self.teachers.predict_scores(
                self._rows(missing), binary=True, progress=self.progress, device=self._device
            )
            self._have_scores[missing] = True
            self.seconds += time.perf_counter() - t0
        return self._scores[:, index]

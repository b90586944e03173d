"""Many dense students trained at once: one vectorised fit of several training sets × learning rates.

Choosing the student's settings by cross-validation (:mod:`pate_stab.student.select`) trains
one student per (fold, grid point). Fitted one by one, each is a Lightning fit of thousands of
small steps; here they are one stacked model whose steps are a few batched matrix products.

The students are grouped: group g is one training set (inputs ``x[positions_g]``, targets
``targets_g``) with one initialisation seed and one data-order seed, and within a group one
student per learning rate. Student (g, l) is the student that :func:`fit_dense_student` fits
alone on group g with learning rate ``lrs[l]`` (the same operations; a batched matrix product may
round differently for another number of students, ~1e-7 per step):

- initialisation: the student's architecture drawn from ``init_seed`` as
  :func:`~pate_stab.student.training.initialised_network` draws it (bit for bit, through
  :func:`~pate_stab.models.stacked.init_stacked_parameters`);
- data order: each epoch a permutation ``torch.randperm(n_g, generator=<seeded data_seed>)``,
  cut into consecutive batches of ``batch_size`` (the last one smaller);
- loss: the batch mean of the cross-entropy (class targets) or of the binary cross-entropy on
  log p(1|x) − log p(0|x) (score targets), as :class:`~pate_stab.student.training.StudentModule`;
- optimiser: Adam (Kingma & Ba 2015, Alg. 1) as ``torch.optim.Adam(fused=True)`` computes it,
  one step counter and one learning rate per student
  (:class:`~pate_stab.models.stacked_optim.StackedAdam` on its fused path, which runs
  PyTorch's fused Adam kernel on each student's slice).

The G·L students are one stack of the teachers' kind: student (g, l) is stacked model g·L + l,
the forward pass is :func:`~pate_stab.models.stacked.stacked_forward` (one batched matrix
product per layer, each student on its group's batch) and the gradients come from autograd.
Students never mix: the training loss is the *sum* of the students' batch means, so student
(g, l)'s gradient is that of its own loss; a group whose epoch has no step left is skipped
(its students neither compute nor move: they are left out of the forward pass and inactive in
the optimiser). The data order is drawn here rather than by a
``DataLoader``, so a stacked student and :func:`~pate_stab.student.training.train_student` with
the same seeds see the same maths in a different batch order.

Dense students only ("logistic", "mlp"): the CNN would need a vmap of convolutions per student.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from pate_stab._checks import check_int, check_positive, check_tensor
from pate_stab.models.networks import ModelSpec, build_model
from pate_stab.models.stacked import init_stacked_parameters, stacked_forward
from pate_stab.models.stacked_optim import StackedAdam

__all__ = ["StackedStudents", "StudentGroup", "fit_dense_student", "train_stacked_students"]


@dataclass(frozen=True)
class StudentGroup:
    """One training set of the stacked students: rows of the shared inputs, their targets, seeds.

    Attributes:
        positions: int64 (n,) rows of the inputs ``x`` the group trains on (repeats allowed).
        targets: (n,) int64 classes, or float32 scores in [0, 1] (binary tasks).
        init_seed: seed of the students' initialisation.
        data_seed: seed of the group's data order.
    """

    positions: Tensor
    targets: Tensor
    init_seed: int
    data_seed: int


@dataclass
class StackedStudents:
    """Trained stacked students: ``params[name]`` is (G, L, *shape), student (g, l) at ``[g, l]``."""

    spec: ModelSpec
    params: dict[str, Tensor]
    lrs: tuple[float, ...]

    @torch.no_grad()
    def logits(self, group: int, x: Tensor) -> Tensor:
        """(L, n, C) logits of group ``group``'s students on inputs ``x`` (n, …)."""
        params = {name: p[group] for name, p in self.params.items()}  # (L, …)
        return stacked_forward(_dense_base(self.spec), params, x.float(), shared_input=True)


def _dense_base(spec: ModelSpec) -> nn.Module:
    """The dense student's architecture, the ``base`` of :func:`~pate_stab.models.stacked.stacked_forward`."""
    if spec.kind not in ("logistic", "mlp"):
        raise ValueError(f"stacked students are dense ('logistic' or 'mlp'), got {spec.kind!r}")
    return build_model(spec)  # Sequential(Flatten, Sequential(Linear, ReLU, …, Linear))


def _batch_losses(logits: Tensor, targets: Tensor, *, soft: bool) -> Tensor:
    """(k, B) per-example losses of logits (k, B, C): cross-entropy on classes, or binary
    cross-entropy on the margin log p(1|x) − log p(0|x) for scores in [0, 1]."""
    if soft:
        return F.binary_cross_entropy_with_logits(logits[..., 1] - logits[..., 0], targets, reduction="none")
    return F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (k, C, B) form


def _epoch_batches(groups: Sequence[StudentGroup], gens: list[torch.Generator], batch_size: int) -> tuple[Tensor, ...]:
    """One epoch's plan: (G, S, B) rows of x, (G, S, B) loss weights (1/batch size, 0 on padding), (G,) steps."""
    sizes = [int(grp.positions.numel()) for grp in groups]
    steps = [math.ceil(n / batch_size) for n in sizes]
    s_max = max(steps)
    rows = torch.zeros(len(groups), s_max * batch_size, dtype=torch.int64)
    weight = torch.zeros(len(groups), s_max * batch_size)
    for j, (gen, n) in enumerate(zip(gens, sizes, strict=True)):
        order = torch.randperm(n, generator=gen)
        rows[j, :n] = order
        counts = torch.full((steps[j],), float(batch_size))
        counts[-1] = n - batch_size * (steps[j] - 1)  # the last batch is smaller
        weight[j, :n] = (1.0 / counts).repeat_interleave(batch_size)[:n]
    shape = (len(groups), s_max, batch_size)
    return rows.view(shape), weight.view(shape), torch.tensor(steps)


def train_stacked_students(
    x: Tensor,
    groups: Sequence[StudentGroup],
    *,
    spec: ModelSpec,
    lrs: Sequence[float],
    epochs: int,
    batch_size: int,
    weight_decay: float = 0.0,
) -> StackedStudents:
    """Train len(groups) × len(lrs) dense students at once (see the module docstring for the maths).

    Args:
        x: (N, …) float inputs shared by the groups (public inputs only).
        groups: the training sets; all with class targets, or all with score targets.
        spec: the students' architecture ("logistic" or "mlp").
        lrs: Adam learning rates; group g trains one student per rate.
        epochs, batch_size, weight_decay: as :class:`~pate_stab.student.training.StudentConfig`.

    Returns:
        :class:`StackedStudents`; a group with no examples keeps its initialisation.

    Raises:
        ValueError: an empty grid, a non-dense ``spec``, targets of mixed kinds or positions
            outside ``x``.
    """
    x = check_tensor("x", x, floating=True).reshape(x.shape[0], -1).float()
    epochs = check_int("epochs", epochs, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    lrs = tuple(check_positive("lr", float(v)) for v in lrs)
    if not groups or not lrs:
        raise ValueError("train_stacked_students needs at least one group and one learning rate")
    base = _dense_base(spec)
    soft = {bool(grp.targets.is_floating_point()) for grp in groups}
    if len(soft) != 1:
        raise ValueError("the groups' targets must all be classes or all be scores")
    is_soft = soft.pop()
    for grp in groups:
        if grp.positions.numel() != grp.targets.numel():
            raise ValueError(f"{grp.positions.numel()} positions but {grp.targets.numel()} targets in a group")
        if grp.positions.numel() and (int(grp.positions.min()) < 0 or int(grp.positions.max()) >= x.shape[0]):
            raise ValueError(f"group positions must lie in [0, {x.shape[0] - 1}]")
    num_lrs = len(lrs)
    seeds = [grp.init_seed for grp in groups for _ in lrs]
    params = {n: p.view(len(groups), num_lrs, *p.shape[1:]) for n, p in init_stacked_parameters(spec, seeds).items()}
    trained = StackedStudents(spec, params, lrs)
    # order the groups by size, largest first: the groups with a step left are always a prefix
    live = [j for j in sorted(range(len(groups)), key=lambda j: -groups[j].positions.numel())
            if groups[j].positions.numel()]  # fmt: skip
    if not live:
        return trained
    order = torch.tensor(live)
    k = len(live) * num_lrs  # student (g, l) of the g-th live group is stacked model g·L + l
    work = {n: p[order].reshape(k, *p.shape[2:]).clone() for n, p in params.items()}
    # gradients of the steps some students sit out: the live ones' rows, zero for the others
    partial_grads = {n: torch.zeros_like(p) for n, p in work.items()}
    # fused=True: each student steps as torch.optim.Adam(fused=True) on its own (module docstring)
    optimiser = StackedAdam(
        work.values(), num_teachers=k, lr=torch.tensor(lrs, dtype=torch.float64).repeat(len(live)),
        weight_decay=weight_decay, fused=True,
    )  # fmt: skip
    live_groups = [groups[j] for j in live]
    gens = [torch.Generator().manual_seed(int(grp.data_seed)) for grp in live_groups]
    group_x = [grp.positions.long() for grp in live_groups]
    group_t = [grp.targets.float() if is_soft else grp.targets.long() for grp in live_groups]
    for _ in range(epochs):
        rows, weight, steps = _epoch_batches(live_groups, gens, batch_size)
        pos = torch.stack([group_x[j][rows[j]] for j in range(len(live))])  # (G', S, B) rows of x
        tgt = torch.stack([group_t[j][rows[j]] for j in range(len(live))])  # (G', S, B)
        for s in range(rows.shape[1]):
            a = int((steps > s).sum())  # groups 0 … a − 1 take this step: students 0 … m − 1
            m = a * num_lrs
            xb = x.index_select(0, pos[:a, s].reshape(-1)).view(a, batch_size, -1)
            # each of a group's L students reads the group's batch (stacked_forward: a batch per
            # block of L students) and its targets and weights
            tb, wb = (t.repeat_interleave(num_lrs, dim=0) for t in (tgt[:a, s], weight[:a, s]))
            # autograd leaves: the live students' rows of the stacked parameters (views, no copy)
            live_params = {n: p[:m].requires_grad_() for n, p in work.items()}
            logits = stacked_forward(base, live_params, xb, shared_input=False)
            # the sum over students of each one's batch mean: student (g, l)'s gradient is its own loss's
            loss = (_batch_losses(logits, tb, soft=is_soft) * wb).sum()
            for (n, p), grad in zip(work.items(), torch.autograd.grad(loss, list(live_params.values())), strict=True):
                if m < k:
                    partial_grads[n][:m], partial_grads[n][m:] = grad, 0.0
                    grad = partial_grads[n]
                p.grad = grad
            optimiser.active = torch.arange(k) < m
            optimiser.step()
    for n, p in work.items():
        params[n][order] = p.view(len(live), num_lrs, *p.shape[1:])
    return trained


def fit_dense_student(
    x: Tensor,
    group: StudentGroup,
    *,
    spec: ModelSpec,
    lr: float,
    epochs: int,
    batch_size: int,
    weight_decay: float = 0.0,
) -> StackedStudents:
    """One student of :func:`train_stacked_students`, fitted alone (a stack of one group and one rate)."""
    return train_stacked_students(
        x, [group], spec=spec, lrs=[lr], epochs=epochs, batch_size=batch_size, weight_decay=weight_decay
    )

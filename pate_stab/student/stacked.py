"""Many dense students trained at once: one vectorised fit of several training sets × learning rates.

Choosing the student's settings by cross-validation (:mod:`pate_stab.run.student_select`) trains
one student per (fold, grid point). Fitted one by one, each is a Lightning fit of thousands of
small steps; here they are one stacked model whose steps are a few batched matrix products.

The students are grouped: group g is one training set (inputs ``x[positions_g]``, targets
``targets_g``) with one initialisation seed and one data-order seed, and within a group one
student per learning rate. Student (g, l) is the student that :func:`fit_dense_student` fits
alone on group g with learning rate ``lrs[l]`` (the same operations; a batched matrix product may
round differently for another number of students, ~1e-7 per step):

- initialisation: the student's architecture drawn from ``init_seed`` as
  :func:`~pate_stab.student.training.initialised_network` draws it (bit for bit, through
  :func:`~pate_stab.teachers.ensemble.init_stacked_parameters`);
- data order: each epoch a permutation ``torch.randperm(n_g, generator=<seeded data_seed>)``,
  cut into consecutive batches of ``batch_size`` (the last one smaller);
- loss: the batch mean of the cross-entropy (class targets) or of the binary cross-entropy on
  log p(1|x) − log p(0|x) (score targets), as :class:`~pate_stab.student.training.StudentModule`;
- optimiser: Adam (Kingma & Ba 2015, Alg. 1) as ``torch.optim.Adam(fused=True)`` computes it,
  one step counter per student (``torch.optim.adam.adam``, the function behind that optimiser).

Students never mix: the training loss is the *sum* of the students' batch means, so student
(g, l)'s gradient is that of its own loss; a group whose epoch has no step left is skipped
(its students neither compute nor move). The data order is drawn here rather than by a
``DataLoader``, so a stacked student and :func:`~pate_stab.student.training.train_student` with
the same seeds see the same maths in a different batch order.

Dense students only ("logistic", "mlp"): the CNN would need a vmap of convolutions per student.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.optim.adam import adam

from pate_stab._validation import check_int, check_positive, check_tensor
from pate_stab.teachers.ensemble import init_stacked_parameters
from pate_stab.teachers.models import ModelSpec, build_model

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
        params = {name: p[group : group + 1] for name, p in self.params.items()}  # (1, L, …)
        return _dense_logits(_layer_names(self.spec), params, x.reshape(x.shape[0], -1).float().unsqueeze(0))[0]


def _layer_names(spec: ModelSpec) -> list[tuple[str, str]]:
    """(weight, bias) names of the dense student's Linear layers, in forward order."""
    if spec.kind not in ("logistic", "mlp"):
        raise ValueError(f"stacked students are dense ('logistic' or 'mlp'), got {spec.kind!r}")
    model = build_model(spec)  # Sequential(Flatten, Sequential(Linear, ReLU, …, Linear))
    return [(f"{name}.weight", f"{name}.bias") for name, m in model.named_modules() if isinstance(m, nn.Linear)]


def _dense_logits(layers: list[tuple[str, str]], params: dict[str, Tensor], x: Tensor) -> Tensor:
    """Logits (G, L, B, C) of stacked students ``params[name]`` (G, L, out, in) on batches ``x`` (G, B, D).

    The L students of a group share its batch, so the first layer is one matrix product per
    group of all L·out weight rows with the batch; activations stay feature-major, (G·L, width, B).
    """
    (w0, b0), rest = layers[0], layers[1:]
    weight, bias = params[w0], params[b0]
    g, lr_count, out, width = weight.shape
    h = torch.baddbmm(bias.reshape(g, lr_count * out, 1), weight.reshape(g, lr_count * out, width), x.transpose(1, 2))
    h = h.view(g * lr_count, out, x.shape[1])  # (G·L, out, B)
    for w_name, b_name in rest:
        w, b = params[w_name], params[b_name]
        h = torch.baddbmm(b.reshape(g * lr_count, -1, 1), w.reshape(g * lr_count, *w.shape[2:]), h.relu())
    return h.view(g, lr_count, h.shape[1], h.shape[2]).transpose(2, 3)  # (G, L, B, C)


@torch.no_grad()
def _gradients(
    layers: list[tuple[str, str]],
    params: dict[str, Tensor],
    grads: dict[str, Tensor],
    x: Tensor,
    targets: Tensor,
    weight: Tensor,
    *,
    soft: bool,
) -> None:
    """Each student's gradient of its batch loss Σ_b weight_b · loss_b, written into ``grads``.

    Backpropagation through the dense layers by hand (the same products autograd would form,
    without its bookkeeping): ``params`` (A, L, out, in) / (A, L, out), inputs ``x`` (A, B, D)
    shared by a group's L students, ``targets`` and ``weight`` (A, B).
    """
    a, num_lrs = params[layers[0][0]].shape[:2]
    b = x.shape[1]
    first = x.transpose(1, 2)  # (A, D, B)
    pre: list[Tensor] = []  # each layer's output before the ReLU, (A·L, out, B)
    w0, b0 = layers[0]
    out0 = params[w0].shape[2]
    h = torch.baddbmm(params[b0].reshape(a, num_lrs * out0, 1), params[w0].reshape(a, num_lrs * out0, -1), first)
    pre.append(h.view(a * num_lrs, out0, b))
    for w_name, b_name in layers[1:]:
        w = params[w_name].reshape(a * num_lrs, *params[w_name].shape[2:])
        pre.append(torch.baddbmm(params[b_name].reshape(a * num_lrs, -1, 1), w, pre[-1].relu()))
    logits = pre[-1]  # (A·L, C, B)
    scale = weight.unsqueeze(1).expand(a, num_lrs, b).reshape(a * num_lrs, 1, b)
    if soft:  # d/dz of BCE on m = z1 − z0: (σ(m) − t) on z1, its negative on z0
        t = targets.unsqueeze(1).expand(a, num_lrs, b).reshape(a * num_lrs, 1, b)
        dm = (torch.sigmoid(logits[:, 1:2] - logits[:, 0:1]) - t) * scale
        dz = torch.cat([-dm, dm], dim=1)
    else:  # d/dz of cross-entropy: softmax(z) − onehot(y)
        dz = logits.softmax(dim=1)
        y = targets.unsqueeze(1).expand(a, num_lrs, b).reshape(a * num_lrs, 1, b)
        dz.scatter_add_(1, y, torch.full(y.shape, -1.0)).mul_(scale)
    for k in range(len(layers) - 1, 0, -1):
        w_name, b_name = layers[k]
        act = pre[k - 1].relu()  # (A·L, in, B)
        torch.bmm(dz, act.transpose(1, 2), out=grads[w_name].view(a * num_lrs, *grads[w_name].shape[2:]))
        torch.sum(dz, dim=2, out=grads[b_name].view(a * num_lrs, -1))
        w = params[w_name].reshape(a * num_lrs, *params[w_name].shape[2:])
        dz = torch.bmm(w.transpose(1, 2), dz).mul_(pre[k - 1] > 0)
    torch.bmm(dz.view(a, num_lrs * out0, b), x, out=grads[w0].view(a, num_lrs * out0, -1))
    torch.sum(dz, dim=2, out=grads[b0].view(a * num_lrs, out0))


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
    layers = _layer_names(spec)
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
    work = {n: p[order].contiguous() for n, p in params.items()}  # (G', L, …)
    exp_avg = {n: torch.zeros_like(p) for n, p in work.items()}
    exp_avg_sq = {n: torch.zeros_like(p) for n, p in work.items()}
    counters = {n: torch.zeros(len(live), num_lrs) for n in work}  # one Adam step counter per parameter
    live_groups = [groups[j] for j in live]
    gens = [torch.Generator().manual_seed(int(grp.data_seed)) for grp in live_groups]
    group_x = [grp.positions.long() for grp in live_groups]
    group_t = [grp.targets.float() if is_soft else grp.targets.long() for grp in live_groups]
    grads = {n: torch.empty_like(p) for n, p in work.items()}
    names = list(work)
    # slices[i][l][name][g]: student (g, l)'s slice of parameters, gradients, moments, step counters
    slices = [[{n: list(t[n][:, l_idx].unbind(0)) for n in names} for l_idx in range(num_lrs)]
              for t in (work, grads, exp_avg, exp_avg_sq, counters)]  # fmt: skip
    for _ in range(epochs):
        rows, weight, steps = _epoch_batches(live_groups, gens, batch_size)
        pos = torch.stack([group_x[j][rows[j]] for j in range(len(live))])  # (G', S, B) rows of x
        tgt = torch.stack([group_t[j][rows[j]] for j in range(len(live))])  # (G', S, B)
        for s in range(rows.shape[1]):
            a = int((steps > s).sum())  # groups 0 … a − 1 take this step
            xb = x.index_select(0, pos[:a, s].reshape(-1)).view(a, batch_size, -1)
            _gradients(layers, {n: p[:a] for n, p in work.items()}, {n: g[:a] for n, g in grads.items()},
                       xb, tgt[:a, s], weight[:a, s], soft=is_soft)  # fmt: skip
            for l_idx, lr in enumerate(lrs):
                p_l, g_l, m_l, v_l, c_l = ([v for n in names for v in t[l_idx][n][:a]] for t in slices)
                adam(p_l, g_l, m_l, v_l, [], c_l, fused=True, amsgrad=False, beta1=0.9, beta2=0.999, lr=lr,
                     weight_decay=weight_decay, eps=1e-8, maximize=False)  # fmt: skip
    for n, p in work.items():
        params[n][order] = p
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

"""Per-teacher optimisers for stacked parameters: :class:`StackedAdam` and :class:`StackedSGD`.

Teacher j's parameters are slice ``[j]`` of every stacked tensor (shape ``(k, *shape)``,
:mod:`pate_stab.models.stacked`). The optimisers update each teacher only on the steps where
it is active (``optimizer.active``, a (k,) bool mask), keep one step counter per teacher, and are
elementwise otherwise — so teacher j follows the same trajectory as when it is trained alone
with the same data order (the sequential mode). Global operations that would mix teachers
(gradient-norm clipping over all parameters, a loss averaged over teachers with an adaptive
schedule on it, early stopping on the ensemble's mean loss) are not offered: one record would
then move every teacher, breaking DESIGN.md fact 2.

The learning rate ``lr`` is one float for every stacked model, or one value per stacked model (a
1-D tensor or sequence of length ``num_teachers``): slice j then steps with ``lr[j]``, as the
plain optimiser with learning rate ``lr[j]`` on that slice alone. The stacked students of
:mod:`pate_stab.student.stacked` use this to train several learning rates in one stack.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_nonnegative, check_tensor

__all__ = ["StackedAdam", "StackedSGD"]


def _per_teacher(values: Tensor, p: Tensor) -> Tensor:
    """(k,) coefficients → (k, 1, …, 1) in ``p``'s dtype, broadcasting over each teacher's slice."""
    return values.to(p.dtype).view(-1, *([1] * (p.dim() - 1)))


def _check_learning_rate(lr: float | Sequence[float] | Tensor, num_teachers: int) -> float | Tensor:
    """``lr`` as one float for every stacked model, or as a float64 (k,) CPU tensor, one per model.

    Raises:
        TypeError: ``lr`` is neither a real number nor a 1-D sequence / tensor of real numbers.
        ValueError: a per-model ``lr`` of the wrong length, or any value negative, NaN or infinite.
    """
    if isinstance(lr, (bool, str, bytes)) or (isinstance(lr, Tensor) and lr.dtype == torch.bool):
        raise TypeError(f"lr must be a real number or one real number per stacked model, got {lr!r}")
    if isinstance(lr, numbers.Real) or (isinstance(lr, Tensor) and lr.dim() == 0):
        return check_nonnegative("lr", lr)
    if not isinstance(lr, Tensor):
        if isinstance(lr, Sequence) and any(isinstance(v, bool) for v in lr):
            raise TypeError(f"lr must hold real numbers, got {lr!r}")
        try:  # float64 keeps Python floats exact (the default float32 would round 1e-3)
            lr = torch.as_tensor(lr, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"lr must be a real number or one real number per stacked model, got {lr!r}") from exc
    values = check_tensor("lr", lr, ndim=1, nonempty=False)
    if values.numel() != num_teachers:
        raise ValueError(f"lr has {values.numel()} values; a per-model lr needs one per stacked model ({num_teachers})")
    values = values.detach().to(device="cpu", dtype=torch.float64).clone()
    negative = (values < 0).nonzero().flatten()
    if negative.numel():
        j = int(negative[0])
        raise ValueError(f"lr must be >= 0 for every stacked model, got {float(values[j])} for model {j}")
    return values


def _learning_rate(group: dict[str, Any], p: Tensor) -> float | Tensor:
    """The group's lr: a float, or the (k,) float64 per-model rates on ``p``'s device."""
    lr = group["lr"]
    return lr.to(p.device) if isinstance(lr, Tensor) else lr


class _StackedOptimizer(torch.optim.Optimizer):
    """Base: parameters have a leading teacher axis of size ``num_teachers``; ``active`` masks.

    A step is a few whole-tensor in-place operations with per-teacher (k, 1, …, 1) coefficients;
    an inactive teacher's coefficients make every operation leave its slices exactly unchanged.
    The same operations run whichever teachers are active, so teacher j's arithmetic never
    depends on another teacher's activity.
    """

    def __init__(self, params: Iterable[Tensor], defaults: dict[str, Any], num_teachers: int) -> None:
        num_teachers = check_int("num_teachers", num_teachers, minimum=1)
        defaults = {**defaults, "lr": _check_learning_rate(defaults["lr"], num_teachers)}
        super().__init__(params, defaults)
        self.num_teachers = num_teachers
        self.active: Tensor | None = None  # (k,) bool, set before each step; None = all active
        self._scratch: Tensor | None = None  # reused work space, not optimiser state

    def _scratch_like(self, p: Tensor) -> Tensor:
        """An uninitialised tensor shaped like ``p``, reusing one buffer across parameters and
        steps (allocating and first touching tens of MB every step costs page faults)."""
        buf = getattr(self, "_scratch", None)  # absent after unpickling
        if buf is None or buf.numel() < p.numel() or buf.dtype != p.dtype or buf.device != p.device:
            buf = self._scratch = torch.empty(p.numel(), dtype=p.dtype, device=p.device)
        return buf[: p.numel()].view(p.shape)

    def _active(self, p: Tensor) -> Tensor:
        """(k,) bool on ``p``'s device."""
        if p.shape[0] != self.num_teachers:
            raise ValueError(f"stacked parameter has leading size {p.shape[0]}, expected {self.num_teachers}")
        if self.active is None:
            return torch.ones(self.num_teachers, dtype=torch.bool, device=p.device)
        return self.active.to(p.device)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:  # type: ignore[override]
        """One step of every parameter that has a gradient, for the teachers in ``active``."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is not None:
                    self._update(p, grad, group, self._active(p))
        return loss

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], active: Tensor) -> None:
        """Update the stacked parameter ``p`` (gradient ``grad``) in place; ``active`` is (k,) bool on its device."""
        raise NotImplementedError


class StackedAdam(_StackedOptimizer):
    """Adam (Kingma & Ba 2015) with one step counter per teacher; inactive teachers are frozen.

    With L2 ``weight_decay`` added to the gradient as in ``torch.optim.Adam``. Teacher j's
    update is ``p −= lr_j/bc1 · m / (√v/√bc2 + eps)`` with its own bias corrections
    ``bc = 1 − β^step_j`` and its own rate ``lr_j`` (``lr`` itself when it is one float, see
    the module docstring).

    Two implementations of that update, chosen per parameter from its shape and ``k`` alone
    (never from which teachers are active, so teacher j's arithmetic stays independent of the
    others):

    - per-teacher fused (CPU): each active teacher's slice is its own tensor in one call of
      PyTorch's fused Adam kernel (the one behind ``torch.optim.Adam(fused=True)``), with its
      own step counter. One pass over memory instead of seven; used where a slice holds at
      least ``fused_min_slice`` elements (a large layer: the stacked tensors no longer fit in
      cache and the whole-tensor path is bound by memory traffic) or there are at most
      ``fused_max_teachers`` teachers (the sequential mode, where the whole-tensor path's
      fixed cost per operation dominates);
    - whole-tensor: a few in-place operations over the stacked tensor with (k, 1, …, 1)
      per-teacher coefficients; everywhere else (many small slices, where one kernel call per
      teacher would cost more than it saves, and on GPUs).

    ``fused=True`` / ``False`` forces one of them on CPU (both compute the same update up to
    floating-point rounding); ``None`` chooses as above.
    """

    fused_min_slice = 8192
    fused_max_teachers = 8

    def __init__(
        self,
        params: Iterable[Tensor],
        *,
        num_teachers: int,
        lr: float | Sequence[float] | Tensor = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        fused: bool | None = None,
    ) -> None:
        check_nonnegative("eps", eps)
        if fused not in (None, True, False):
            raise ValueError(f"fused must be None (automatic), True or False, got {fused!r}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults, num_teachers)
        self.fused = fused
        # id(parameter) → (memory key, float32 step counts, per-teacher views): see _slices
        self._slice_cache: dict[int, tuple[Any, ...]] = {}

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], active: Tensor) -> None:
        beta1, beta2 = group["betas"]
        lr, eps = _learning_rate(group, p), group["eps"]
        on = active.to(torch.float64)
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros(self.num_teachers, dtype=torch.float64, device=p.device)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        state["step"] += on
        if self._use_fused(p):
            self._fused_step(p, grad, state, active, group)
            return
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        step = state["step"].clamp_min(1)
        bc1, bc2 = 1 - beta1**step, 1 - beta2**step
        # p −= s·m / (√v·r + eps) with s = lr/bc1 (per teacher), r = 1/√bc2, computed as
        # p −= m / ((r/s) / rsqrt(v) + eps/s); where v = 0, rsqrt(v) = inf and the first
        # term is exactly 0 (rsqrt rather than sqrt: torch.sqrt is several times slower on
        # zeros, and v is zero for every input feature that is zero in a teacher's shard).
        # An inactive teacher gets weight 0 in both moment updates and the denominator
        # +inf (r/s := 0, eps/s := inf), so m / denom is exactly zero and its parameters,
        # moments and step count stay as they are.
        s = lr / bc1
        moving = (on > 0) & (s > 0)  # lr = 0 (e.g. set by a scheduler) moves nobody
        r_over_s = torch.where(moving, bc2.rsqrt() / s, 0.0)
        eps_over_s = torch.where(moving, eps / s, math.inf)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.lerp_(grad, _per_teacher(on * (1 - beta1), p))
        buf = torch.mul(grad, grad, out=self._scratch_like(p))
        v.lerp_(buf, _per_teacher(on * (1 - beta2), p))
        torch.rsqrt(v, out=buf)
        # two ops with one broadcast operand each: addcdiv with two would not vectorise
        torch.div(_per_teacher(r_over_s, p), buf, out=buf).add_(_per_teacher(eps_over_s, p))
        p.addcdiv_(m, buf, value=-1.0)

    def _use_fused(self, p: Tensor) -> bool:
        """Per-teacher fused kernel for this parameter? A function of its shape and k only."""
        if p.device.type != "cpu" or p.dtype not in (torch.float32, torch.float64):
            return False
        if not hasattr(torch, "_fused_adam_"):  # pragma: no cover - present in torch >= 2.4
            return False
        if getattr(self, "fused", None) is not None:  # absent after unpickling an older state
            return bool(self.fused)
        per_teacher = p[0].numel() if p.shape[0] else 0
        return per_teacher >= self.fused_min_slice or self.num_teachers <= self.fused_max_teachers

    def _slices(self, p: Tensor, state: dict[str, Any]) -> tuple[tuple[Tensor, ...], ...]:
        """Per-teacher views of ``p``, its two moments and its step counts (float32, as the fused
        kernel takes them), built once per parameter and reused while those tensors keep their
        memory: unbinding k slices of each at every step costs as much as updating small slices.

        The float32 counts are refreshed from ``state["step"]`` (float64, exact) at each call.
        """
        cache = getattr(self, "_slice_cache", None)  # absent after unpickling
        if cache is None:
            cache = self._slice_cache = {}
        tensors = (p, state["exp_avg"], state["exp_avg_sq"], state["step"])
        key = tuple((t.data_ptr(), t.shape, t.stride(), t.dtype, t.device) for t in tensors)
        entry = cache.get(id(p))
        if entry is None or entry[0] != key:
            steps32 = torch.empty(state["step"].shape, dtype=torch.float32, device=p.device)
            views = tuple(t.detach().unbind(0) for t in (p, state["exp_avg"], state["exp_avg_sq"], steps32))
            entry = cache[id(p)] = (key, steps32, views)
        entry[1].copy_(state["step"])  # exact below 2^24 steps
        return entry[2]

    def _fused_step(
        self, p: Tensor, grad: Tensor, state: dict[str, Any], active: Tensor, group: dict[str, Any]
    ) -> None:
        """Active teachers' slices, one tensor each, through the fused Adam kernel (the step
        counters were already advanced); inactive teachers' slices are not passed at all.

        The kernel takes one learning rate per call: with per-teacher rates, one call per
        distinct rate, over the active teachers that have it."""
        chosen = active.nonzero().flatten().tolist()
        if not chosen:
            return
        p_views, m_views, v_views, s_views = self._slices(p, state)
        g_views = grad.contiguous().unbind(0)  # contiguous(): the same tensor when it already is
        lr = group["lr"]
        calls: dict[float, list[int]] = {}
        if isinstance(lr, Tensor):
            rates = lr.tolist()
            for j in chosen:
                calls.setdefault(rates[j], []).append(j)
        else:
            calls[float(lr)] = chosen
        views = (p_views, g_views, m_views, v_views, s_views)
        beta1, beta2 = group["betas"]
        for rate, members in calls.items():
            p_j, g_j, m_j, v_j, s_j = ([view[j] for j in members] for view in views)
            torch._fused_adam_(
                p_j,
                g_j,
                m_j,
                v_j,
                [],
                s_j,
                lr=rate,
                beta1=float(beta1),
                beta2=float(beta2),
                weight_decay=float(group["weight_decay"]),
                eps=float(group["eps"]),
                amsgrad=False,
                maximize=False,
            )


class StackedSGD(_StackedOptimizer):
    """SGD with (heavy-ball) momentum as in ``torch.optim.SGD``; inactive teachers are frozen.

    ``lr``: one float, or one rate per teacher (module docstring).
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        *,
        num_teachers: int,
        lr: float | Sequence[float] | Tensor = 0.1,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay}, num_teachers)

    def _update(self, p: Tensor, grad: Tensor, group: dict[str, Any], active: Tensor) -> None:
        on = active.to(torch.float64)
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        if group["momentum"]:
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p)
                state["started"] = torch.zeros(self.num_teachers, dtype=torch.bool, device=p.device)
            # as torch.optim.SGD: buf = grad at the first step, then momentum·buf + grad;
            # an inactive teacher's buffer is multiplied by 1 and gets 0·grad added
            factor = torch.where(active, torch.where(state["started"], group["momentum"], 0.0), 1.0)
            buf = state["momentum_buffer"]
            buf.mul_(_per_teacher(factor, p)).addcmul_(grad, _per_teacher(on, p))
            state["started"] |= active
            grad = buf
        p.addcmul_(grad, _per_teacher(-_learning_rate(group, p) * on, p))

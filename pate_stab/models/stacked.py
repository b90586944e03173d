"""k models as one vectorised model: stacked parameters, their initialisation and forward pass.

Model j's parameters are slice ``[j]`` of every stacked tensor (shape ``(k, *shape)``). Dense
models ("logistic", "mlp") run forward as one batched matrix product per layer
(``torch.baddbmm`` over the stacked weights); other architectures (the CNN) as
``torch.func.vmap`` of ``functional_call`` over the leading axis. Models never mix: model j's
output depends only on its parameters and its own inputs, so with a training loss that is the
*sum* of the per-model losses, model j's gradient is exactly the gradient of its own loss.

The teachers (:mod:`pate_stab.teachers.ensemble`, :mod:`pate_stab.teachers.fixmatch`) and the
stacked students (:mod:`pate_stab.student.stacked`) are such stacks; their per-model optimisers
are in :mod:`pate_stab.models.stacked_optim`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from pate_stab.models.networks import ModelSpec, build_model, init_layout

__all__ = ["init_stacked_parameters", "stacked_forward"]


@torch.no_grad()
def init_stacked_parameters(spec: ModelSpec, seeds: Sequence[int]) -> dict[str, Tensor]:
    """Stacked initial parameters; teacher j is initialised from a generator seeded ``seeds[j]``.

    Slice j equals ``init_parameters(build_model(spec), generator=<seeded seeds[j]>)``
    bit for bit: the same float64 draws in the same order, mapped by the same ``(2u − 1)·bound``.

    Returns:
        ``{name: (k, *shape) float32}`` keyed by the module's parameter names.
    """
    model = build_model(spec)
    layout = init_layout(model)
    drawn = {name for name, _, _ in layout}
    missing = [n for n, _ in model.named_parameters() if n not in drawn]
    if missing:
        raise ValueError(f"no initialisation rule for parameters {missing}")
    k = len(seeds)
    raw = {name: torch.empty((k, *p.shape), dtype=torch.float64) for name, p, _ in layout}
    for j, seed in enumerate(seeds):
        gen = torch.Generator()
        gen.manual_seed(int(seed))
        for name, p, _ in layout:
            torch.rand(p.shape, generator=gen, dtype=torch.float64, out=raw[name][j])
    stacked = {name: raw[name].mul_(2).sub_(1).mul_(bound).to(p.dtype) for name, p, bound in layout}
    return {n: stacked[n] for n, _ in model.named_parameters()}


def _dense_layers(base: nn.Module) -> list[tuple[str, str]] | None:
    """``(weight, bias)`` parameter names of a dense teacher's linear layers, in forward order.

    A dense teacher is what :func:`build_model` makes for "logistic" and "mlp": ``Flatten``, then
    ``Linear`` layers with a ``ReLU`` between consecutive ones. Any other module gives ``None``.
    """
    if not (isinstance(base, nn.Sequential) and len(base) == 2):
        return None
    flatten, body = base[0], base[1]
    if not (isinstance(flatten, nn.Flatten) and flatten.start_dim == 1 and flatten.end_dim == -1):
        return None
    if not isinstance(body, nn.Sequential) or len(body) % 2 == 0:
        return None
    layers = []
    for i, module in enumerate(body):
        if i % 2 == 1:
            if type(module) is not nn.ReLU:
                return None
        elif type(module) is not nn.Linear or module.bias is None:
            return None
        else:
            layers.append((f"1.{i}.weight", f"1.{i}.bias"))
    return layers


def _dense_forward(
    layers: list[tuple[str, str]], params: dict[str, Tensor], x: Tensor, *, shared_input: bool
) -> Tensor:
    """Logits (k, B, C) of stacked dense teachers, one batched matrix product per layer.

    Activations are kept feature-major, (k, width, B): layer ``W`` (k, out, in) maps ``a``
    (k, in, B) to ``baddbmm(b, W, a)`` (k, out, B), so the weight gradient ``g @ aᵀ`` comes out
    in ``W``'s own (k, out, in) layout. With ``shared_input`` the first layer is a single matrix
    product of all k·out weight rows with the batch; with g batches shared by blocks of k/g
    teachers (:func:`stacked_forward`), one such product per batch.
    """
    w0, b0 = layers[0]
    weight, bias = params[w0], params[b0]
    k, out, width = weight.shape
    if shared_input:
        a = x.reshape(x.shape[0], width).T  # (D, B)
        h = torch.addmm(bias.reshape(k * out, 1), weight.reshape(k * out, width), a)
        h = h.view(k, out, x.shape[0])
    else:
        g, rows = x.shape[0], k // x.shape[0] * out  # g batches; weight rows per batch
        a = x.reshape(g, x.shape[1], width).transpose(1, 2)  # (g, D, B)
        h = torch.baddbmm(bias.reshape(g, rows, 1), weight.reshape(g, rows, width), a)
        h = h.view(k, out, x.shape[1])
    for w_name, b_name in layers[1:]:
        h = torch.baddbmm(params[b_name].unsqueeze(2), params[w_name], h.relu_())
    return h.transpose(1, 2)


def stacked_forward(base: nn.Module, params: dict[str, Tensor], x: Tensor, *, shared_input: bool) -> Tensor:
    """Logits of every teacher.

    Dense teachers ("logistic", "mlp") run as explicit batched matrix products
    (:func:`_dense_layers`); any other architecture as ``vmap`` of ``functional_call``.

    Args:
        base: an instance of the architecture (its own parameters are not used).
        params: stacked parameters ``{name: (k, *shape)}``.
        x: (k, B, …) one batch per teacher, or (B, …) the same batch for all when ``shared_input``,
            or (g, B, …) with g dividing k: batch i for the block of k/g consecutive teachers
            i·k/g … (i + 1)·k/g − 1 (the stacked students of :mod:`pate_stab.student.stacked`:
            one block of learning rates per training set).

    Returns:
        (k, B, C) logits (for dense teachers a transposed view of a (k, C, B) tensor).

    Raises:
        ValueError: without ``shared_input``, a leading size of ``x`` that does not divide k.
    """
    k = next(iter(params.values())).shape[0]
    if not shared_input and (x.dim() == 0 or x.shape[0] == 0 or k % x.shape[0]):
        lead = x.shape[0] if x.dim() else None
        raise ValueError(f"x must hold one batch per block of teachers: {lead} batches for {k} teachers")
    layers = _dense_layers(base)
    if layers is not None:
        return _dense_forward(layers, params, x, shared_input=shared_input)
    if not shared_input and x.shape[0] != k:
        x = x.repeat_interleave(k // x.shape[0], dim=0)  # (k, B, …): each teacher its block's batch

    def one(p: dict[str, Tensor], xb: Tensor) -> Tensor:
        return functional_call(base, p, (xb,))

    return vmap(one, in_dims=(0, None if shared_input else 0))(params, x)

import copy
import functools

import pytest
import torch

from pate_stab.models import StackedAdam, StackedSGD
from pate_stab.rng import seeded_generator


def _grads(k, shape, steps, seed=0):
    g = seeded_generator(seed)
    return [torch.randn(k, *shape, generator=g) for _ in range(steps)]


def _masks(k, steps, seed=1):
    g = seeded_generator(seed)
    masks = torch.rand(steps, k, generator=g) < 0.7
    masks[:, 0] = True  # one teacher always active, one never
    masks[:, 1] = False
    return masks


# StackedAdam has two implementations (whole-tensor, per-teacher fused kernel); both are tested
_ADAM_PATHS = [{"fused": False}, {"fused": True}]


@pytest.mark.parametrize(
    "stacked_cls, torch_cls, kw",
    [
        *((StackedAdam, torch.optim.Adam, {"lr": 1e-2, **path}) for path in _ADAM_PATHS),
        *((StackedAdam, torch.optim.Adam, {"lr": 1e-2, "weight_decay": 0.1, **path}) for path in _ADAM_PATHS),
        (StackedSGD, torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
        (StackedSGD, torch.optim.SGD, {"lr": 0.1, "weight_decay": 0.1}),
    ],
)
def test_stacked_optimizer_is_per_teacher_torch_optimizer(stacked_cls, torch_cls, kw):
    ref_kw = {key: value for key, value in kw.items() if key != "fused"}
    k, shape, steps = 5, (3, 4), 12
    init = torch.randn(k, *shape, generator=seeded_generator(2))
    grads, masks = _grads(k, shape, steps), _masks(k, steps)
    stacked = torch.nn.Parameter(init.clone())
    opt = stacked_cls([stacked], num_teachers=k, **kw)
    for grad, mask in zip(grads, masks, strict=True):
        stacked.grad = grad.clone()
        opt.active = mask
        opt.step()
    for j in range(k):
        alone = torch.nn.Parameter(init[j].clone())
        ref = torch_cls([alone], **ref_kw)
        for grad, mask in zip(grads, masks, strict=True):
            if mask[j]:  # teacher j alone takes only its active steps
                alone.grad = grad[j].clone()
                ref.step()
        torch.testing.assert_close(stacked.detach()[j], alone.detach(), rtol=1e-5, atol=1e-6)
    assert torch.equal(stacked.detach()[1], init[1])  # never active: bit-for-bit untouched


@pytest.mark.parametrize(
    "stacked_cls",
    [
        functools.partial(StackedAdam, fused=False),
        functools.partial(StackedAdam, fused=True),
        StackedAdam,
        StackedSGD,
    ],
)
def test_teacher_update_ignores_other_teachers(stacked_cls):
    # teacher 0 gets the same gradients in both runs; the others' gradients and activity differ
    k, shape, steps = 4, (6,), 8
    init = torch.randn(k, *shape, generator=seeded_generator(3))
    own = _grads(1, shape, steps, seed=9)
    finals = []
    for seed in (0, 1):
        grads, masks = _grads(k, shape, steps, seed=seed), _masks(k, steps, seed=seed + 5)
        p = torch.nn.Parameter(init.clone())
        opt = stacked_cls([p], num_teachers=k, lr=0.05)
        for grad, g0, mask in zip(grads, own, masks, strict=True):
            grad[0] = g0[0]
            p.grad = grad
            opt.active = mask
            opt.step()
        finals.append(p.detach().clone())
    assert torch.equal(finals[0][0], finals[1][0])
    assert not torch.equal(finals[0][2:], finals[1][2:])


@pytest.mark.parametrize("fused", [False, True])
def test_zero_learning_rate_moves_nobody(fused):
    p = torch.nn.Parameter(torch.randn(3, 5, generator=seeded_generator(0)))
    before = p.detach().clone()
    opt = StackedAdam([p], num_teachers=3, lr=0.0, fused=fused)
    for _ in range(3):
        p.grad = torch.randn(3, 5, generator=seeded_generator(1))
        opt.step()
    assert torch.equal(p.detach(), before)


def test_adam_paths_agree_and_automatic_choice_depends_on_shape_only():
    # large slices (a big layer) or few teachers: fused; many small slices: whole-tensor
    big = torch.nn.Parameter(torch.zeros(20, StackedAdam.fused_min_slice))
    small = torch.nn.Parameter(torch.zeros(20, 7))
    few = torch.nn.Parameter(torch.zeros(2, 7))
    assert StackedAdam([big], num_teachers=20)._use_fused(big)
    assert not StackedAdam([small], num_teachers=20)._use_fused(small)
    assert StackedAdam([few], num_teachers=2)._use_fused(few)
    # the two paths give the same trajectory up to rounding, inactive teachers included
    k, shape, steps = 6, (40,), 15
    init = torch.randn(k, *shape, generator=seeded_generator(4))
    grads, masks = _grads(k, shape, steps, seed=11), _masks(k, steps, seed=12)
    finals = []
    for fused in (False, True):
        p = torch.nn.Parameter(init.clone())
        opt = StackedAdam([p], num_teachers=k, lr=0.03, weight_decay=0.01, fused=fused)
        for grad, mask in zip(grads, masks, strict=True):
            p.grad = grad.clone()
            opt.active = mask
            opt.step()
        finals.append(p.detach().clone())
    torch.testing.assert_close(finals[0], finals[1], rtol=1e-5, atol=1e-6)
    assert torch.equal(finals[1][1], init[1])


def test_fused_argument_is_checked():
    p = torch.nn.Parameter(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="fused"):
        StackedAdam([p], num_teachers=2, fused="yes")


# one learning rate per stacked slice (the stacked students' grid); 0.0: that slice never moves
_PER_SLICE_LRS = [1e-3, 3e-3, 1e-2, 0.0, 3e-3]


@pytest.mark.parametrize(
    "stacked_cls, torch_cls, kw",
    [
        *((StackedAdam, torch.optim.Adam, path) for path in _ADAM_PATHS),
        *((StackedAdam, torch.optim.Adam, {"weight_decay": 0.1, **path}) for path in _ADAM_PATHS),
        (StackedSGD, torch.optim.SGD, {"momentum": 0.9}),
    ],
)
@pytest.mark.parametrize("as_tensor", [False, True], ids=["sequence", "tensor"])
def test_per_slice_lr_is_the_torch_optimizer_with_that_lr_on_the_slice_alone(stacked_cls, torch_cls, kw, as_tensor):
    ref_kw = {key: value for key, value in kw.items() if key != "fused"}
    k, shape, steps = len(_PER_SLICE_LRS), (3, 4), 12
    init = torch.randn(k, *shape, generator=seeded_generator(2))
    grads, masks = _grads(k, shape, steps), _masks(k, steps)
    stacked = torch.nn.Parameter(init.clone())
    lrs = torch.tensor(_PER_SLICE_LRS) if as_tensor else list(_PER_SLICE_LRS)
    opt = stacked_cls([stacked], num_teachers=k, lr=lrs, **kw)
    for grad, mask in zip(grads, masks, strict=True):
        stacked.grad = grad.clone()
        opt.active = mask
        opt.step()
    for j, lr in enumerate(_PER_SLICE_LRS):
        alone = torch.nn.Parameter(init[j].clone())
        ref = torch_cls([alone], lr=lr, **ref_kw)
        for grad, mask in zip(grads, masks, strict=True):
            if mask[j]:
                alone.grad = grad[j].clone()
                ref.step()
        torch.testing.assert_close(stacked.detach()[j], alone.detach(), rtol=1e-6, atol=1e-6)
    assert torch.equal(stacked.detach()[1], init[1])  # never active
    assert torch.equal(stacked.detach()[3], init[3])  # lr 0
    assert not torch.equal(stacked.detach()[0], init[0])


@pytest.mark.parametrize("fused", [False, True])
def test_equal_per_slice_lrs_are_the_single_lr_bit_for_bit(fused):
    k, shape, steps = 4, (5, 3), 10
    init = torch.randn(k, *shape, generator=seeded_generator(6))
    grads, masks = _grads(k, shape, steps, seed=7), _masks(k, steps, seed=8)
    finals = []
    for lr in (3e-3, [3e-3] * k):
        p = torch.nn.Parameter(init.clone())
        opt = StackedAdam([p], num_teachers=k, lr=lr, weight_decay=0.01, fused=fused)
        for grad, mask in zip(grads, masks, strict=True):
            p.grad = grad.clone()
            opt.active = mask
            opt.step()
        finals.append(p.detach().clone())
    assert torch.equal(finals[0], finals[1])


@pytest.mark.parametrize("cls", [StackedAdam, StackedSGD])
@pytest.mark.parametrize(
    "lr, error, match",
    [
        ([1e-3, 1e-2], ValueError, r"lr has 2 values; .* one per stacked model \(3\)"),
        (torch.ones(4), ValueError, r"lr has 4 values"),
        ([1e-3, float("nan"), 1e-2], ValueError, "lr contains NaN or infinite"),
        ([1e-3, float("inf"), 1e-2], ValueError, "lr contains NaN or infinite"),
        ([1e-3, -1e-2, 1e-2], ValueError, r"lr must be >= 0 for every stacked model, got -0.01 for model 1"),
        (torch.ones(3, 1), ValueError, "lr must have 1 dimensions"),
        (-1e-3, ValueError, "lr must be >= 0"),
        (float("nan"), ValueError, "lr must be finite"),
        (torch.tensor([True, False, True]), TypeError, "lr must be a real number"),
        (True, TypeError, "lr must be a real number"),
        ([1e-3, True, 1e-2], TypeError, "lr must hold real numbers"),
        (["a", "b", "c"], TypeError, "lr must be a real number"),
        ("0.01", TypeError, "lr must be a real number"),
    ],
)
def test_bad_learning_rates_are_refused(cls, lr, error, match):
    p = torch.nn.Parameter(torch.zeros(3, 2))
    with pytest.raises(error, match=match):
        cls([p], num_teachers=3, lr=lr)


def test_fused_path_follows_replaced_state_and_parameter_memory():
    # the fused path reuses per-teacher views between steps; a state loaded from a checkpoint or a
    # parameter given new memory mid-run must still be the one updated
    k, shape, steps = 3, (4, 2), 8
    init = torch.randn(k, *shape, generator=seeded_generator(13))
    grads = _grads(k, shape, steps, seed=14)
    runs = []
    for interrupt in (False, True):
        p = torch.nn.Parameter(init.clone())
        opt = StackedAdam([p], num_teachers=k, lr=[1e-2, 3e-3, 1e-3], fused=True)
        for i, grad in enumerate(grads):
            if interrupt and i == 3:
                opt.load_state_dict(copy.deepcopy(opt.state_dict()))  # new moment and step tensors
            if interrupt and i == 5:
                p.data = p.data.clone()  # new parameter memory
            p.grad = grad.clone()
            opt.step()
        runs.append((p.detach().clone(), opt.state[p]["exp_avg"].clone(), opt.state[p]["step"].clone()))
    for straight, interrupted in zip(runs[0], runs[1], strict=True):
        assert torch.equal(straight, interrupted)

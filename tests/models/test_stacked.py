import pytest
import torch

from pate_stab.models import ModelSpec, build_model, init_parameters, init_stacked_parameters, stacked_forward
from pate_stab.rng import seeded_generator


@pytest.mark.parametrize(
    "spec, x_shape",
    [
        (ModelSpec("logistic", (6,), 2), (5, 6)),
        (ModelSpec("mlp", (1, 4, 4), 3, hidden=(8, 7)), (5, 1, 4, 4)),
    ],
)
def test_stacked_forward_per_teacher_batches(spec, x_shape):
    seeds = [21, 22, 23]
    stacked = init_stacked_parameters(spec, seeds)
    x = torch.randn(len(seeds), *x_shape, generator=seeded_generator(0))
    out = stacked_forward(build_model(spec), stacked, x, shared_input=False)
    assert out.shape == (3, 5, spec.num_classes)
    for j, seed in enumerate(seeds):
        model = init_parameters(build_model(spec), generator=seeded_generator(seed))
        torch.testing.assert_close(out[j], model(x[j]), rtol=1e-5, atol=1e-5)


def test_dense_forward_gradients_match_vmap():
    # the explicit batched path and vmap(functional_call) give the same logits and gradients
    from torch.func import functional_call, vmap

    spec = ModelSpec("mlp", (7,), 3, hidden=(5, 4))
    base = build_model(spec)
    params = {n: p.requires_grad_() for n, p in init_stacked_parameters(spec, [1, 2]).items()}
    x = torch.randn(2, 6, 7, generator=seeded_generator(4))
    y = torch.randint(0, 3, (2, 6), generator=seeded_generator(5))

    def loss_of(logits):
        return torch.nn.functional.cross_entropy(logits.reshape(-1, 3), y.reshape(-1))

    fast = stacked_forward(base, params, x, shared_input=False)
    grads = torch.autograd.grad(loss_of(fast), list(params.values()))
    ref = vmap(lambda p, xb: functional_call(base, p, (xb,)))(params, x)
    ref_grads = torch.autograd.grad(loss_of(ref), list(params.values()))
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-6)
    for g, r in zip(grads, ref_grads, strict=True):
        assert g.is_contiguous()  # already in the parameter's layout: no copy when accumulated
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "spec, x_shape",
    [
        (ModelSpec("logistic", (6,), 2), (5, 6)),
        (ModelSpec("mlp", (7,), 3, hidden=(8, 5)), (5, 7)),
        (ModelSpec("cnn", (1, 8, 8), 3, channels=(2, 3), hidden=(4,)), (5, 1, 8, 8)),
    ],
)
def test_blocks_of_teachers_share_a_batch(spec, x_shape):
    # 6 teachers, 2 batches: teachers 0-2 read batch 0, teachers 3-5 batch 1; the gradients too
    base = build_model(spec)
    params = {n: p.requires_grad_() for n, p in init_stacked_parameters(spec, range(6)).items()}
    x = torch.randn(2, *x_shape, generator=seeded_generator(7))
    shared = stacked_forward(base, params, x, shared_input=False)
    each = stacked_forward(base, params, x.repeat_interleave(3, dim=0), shared_input=False)
    assert shared.shape == (6, 5, spec.num_classes)
    torch.testing.assert_close(shared, each, rtol=1e-6, atol=1e-6)
    grads = torch.autograd.grad(shared.square().sum(), list(params.values()))
    ref_grads = torch.autograd.grad(each.square().sum(), list(params.values()))
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="4 batches for 6 teachers"):
        stacked_forward(base, params, torch.randn(4, *x_shape), shared_input=False)

"""Stacked dense students: each is the student fitted alone, and the plain PyTorch fit it stands for."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pate_stab.models.networks import ModelSpec
from pate_stab.rng import seeded_generator
from pate_stab.student.stacked import StudentGroup, fit_dense_student, train_stacked_students
from pate_stab.student.training import initialised_network

EPOCHS, BATCH = 3, 16


def _data(soft: bool, kind: str = "mlp"):
    gen = seeded_generator(1)
    x = torch.randn(120, 7, generator=gen)
    classes = 2 if soft else 3
    y = torch.rand(120, generator=gen) if soft else torch.randint(0, 3, (120,), generator=gen)
    spec = ModelSpec(kind, (7,), classes, hidden=(12, 6))
    groups = []
    for i, n in enumerate([70, 33, 100]):  # 33: a last batch of one
        pos = torch.randperm(120, generator=gen)[:n]
        groups.append(StudentGroup(pos, y[pos], init_seed=40 + i, data_seed=50 + i))
    return x, spec, groups


def _plain_fit(x, group: StudentGroup, spec: ModelSpec, lr: float, soft: bool) -> torch.nn.Module:
    """The reference: one nn.Module, torch.optim.Adam(fused=True), the documented data order."""
    net = initialised_network(spec, group.init_seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr, fused=True)
    order_gen = torch.Generator().manual_seed(group.data_seed)
    n = group.positions.numel()
    for _ in range(EPOCHS):
        perm = torch.randperm(n, generator=order_gen)
        for i in range(0, n, BATCH):
            batch = perm[i : i + BATCH]
            logits = net(x[group.positions[batch]])
            target = group.targets[batch]
            if soft:
                loss = F.binary_cross_entropy_with_logits(logits[:, 1] - logits[:, 0], target)
            else:
                loss = F.cross_entropy(logits, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return net


@pytest.mark.parametrize("soft", [False, True], ids=["classes", "scores"])
@pytest.mark.parametrize("kind", ["mlp", "logistic"])
def test_each_stacked_student_is_the_student_fitted_alone(soft, kind):
    x, spec, groups = _data(soft, kind)
    lrs = [1e-3, 1e-2]
    stacked = train_stacked_students(x, groups, spec=spec, lrs=lrs, epochs=EPOCHS, batch_size=BATCH)
    for g, group in enumerate(groups):
        for l_idx, lr in enumerate(lrs):
            alone = fit_dense_student(x, group, spec=spec, lr=lr, epochs=EPOCHS, batch_size=BATCH)
            for name, p in stacked.params.items():
                # the same arithmetic, up to how a batched matrix product rounds for another batch count
                torch.testing.assert_close(p[g, l_idx], alone.params[name][0, 0], atol=1e-6, rtol=1e-6)
            plain = _plain_fit(x, group, spec, lr, soft)
            with torch.no_grad():
                reference = plain(x)
            # float32 rounding of batched vs. single matrix products, over ~30 Adam steps
            torch.testing.assert_close(stacked.logits(g, x)[l_idx], reference, atol=1e-5, rtol=1e-5)


def test_an_empty_group_keeps_its_initialisation_and_bad_input_is_refused():
    x, spec, groups = _data(False)
    empty = StudentGroup(torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64), 7, 8)
    stacked = train_stacked_students(x, [empty, groups[0]], spec=spec, lrs=[1e-2], epochs=1, batch_size=BATCH)
    init = initialised_network(spec, 7).state_dict()
    assert all(torch.equal(stacked.params[n][0, 0], init[n]) for n in init)
    assert not torch.equal(
        stacked.params["1.0.weight"][1, 0], initialised_network(spec, groups[0].init_seed)[1][0].weight
    )
    soft_group = StudentGroup(groups[1].positions, torch.rand(groups[1].positions.numel()), 1, 2)
    with pytest.raises(ValueError, match="all be classes or all be scores"):
        train_stacked_students(x, [groups[0], soft_group], spec=spec, lrs=[1e-2], epochs=1, batch_size=BATCH)
    outside = StudentGroup(torch.tensor([0, 500]), torch.tensor([0, 1]), 1, 2)
    with pytest.raises(ValueError, match=r"positions must lie in \[0, 119\]"):
        train_stacked_students(x, [outside], spec=spec, lrs=[1e-2], epochs=1, batch_size=BATCH)
    with pytest.raises(ValueError, match="dense"):
        train_stacked_students(x, groups, spec=ModelSpec("cnn", (1, 4, 4), 3), lrs=[1e-2], epochs=1, batch_size=4)
    with pytest.raises(ValueError, match="lr"):
        train_stacked_students(x, groups, spec=spec, lrs=[0.0], epochs=1, batch_size=BATCH)

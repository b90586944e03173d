import pytest
import torch

from pate_stab.data import (
    apply_label_noise,
    gaussian_mixture_means,
    make_gaussian_mixture,
    make_halfspace,
    make_interval,
    make_threshold,
    to_signed_labels,
)
from pate_stab.rng import seeded_generator


def test_same_generator_same_data_and_task_fixed_across_generators():
    a = make_gaussian_mixture(200, num_classes=3, dim=5, generator=seeded_generator(1))
    b = make_gaussian_mixture(200, num_classes=3, dim=5, generator=seeded_generator(1))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = make_gaussian_mixture(200, num_classes=3, dim=5, generator=seeded_generator(2))
    assert not torch.equal(a[0], c[0])


def test_gaussian_mixture_shapes_and_class_means():
    x, y = make_gaussian_mixture(30_000, num_classes=4, dim=6, separation=4.0, generator=seeded_generator(3))
    assert x.shape == (30_000, 6) and x.dtype == torch.float32 and y.dtype == torch.int64
    means = gaussian_mixture_means(4, 6, separation=4.0)
    assert torch.cdist(means, means)[0, 1].item() == pytest.approx(4.0)
    for c in range(4):
        # per-coordinate std of a class mean estimate is 1/sqrt(7500) ≈ 0.012; 0.08 is > 6 sigma
        assert torch.allclose(x[y == c].double().mean(0), means[c], atol=0.08)


@pytest.mark.parametrize("dim", [1, 2])
def test_means_low_dimension_separated(dim):
    means = gaussian_mixture_means(5, dim, separation=2.0)
    d = torch.cdist(means, means) + torch.eye(5) * 100
    assert d.min().item() == pytest.approx(2.0)


def test_threshold_and_interval_clean_labels():
    x, y = make_threshold(1000, threshold=0.3, generator=seeded_generator(0))
    assert torch.equal(y, (x[:, 0] >= 0.3).long())
    x, y = make_interval(1000, low=0.2, high=0.6, generator=seeded_generator(0))
    assert torch.equal(y, ((x[:, 0] >= 0.2) & (x[:, 0] <= 0.6)).long())


def test_halfspace_in_unit_ball_and_consistent():
    w = torch.tensor([1.0, -2.0, 0.5])
    x, y = make_halfspace(2000, dim=3, normal=w, offset=0.1, generator=seeded_generator(0))
    assert x.norm(dim=1).max() <= 1.0 + 1e-6
    assert torch.equal(y, ((x.double() @ (w.double() / w.double().norm())) >= 0.1).long())


def test_label_noise_rate_and_other_class():
    n = 100_000
    clean = torch.randint(0, 5, (n,), generator=seeded_generator(0))
    noisy = apply_label_noise(clean, num_classes=5, noise_rate=0.2, generator=seeded_generator(1))
    rate = (noisy != clean).double().mean().item()
    # binomial std sqrt(0.2*0.8/1e5) ≈ 0.00126; 0.008 is > 6 sigma
    assert abs(rate - 0.2) < 0.008
    assert noisy.min() >= 0 and noisy.max() <= 4
    assert torch.equal(
        apply_label_noise(clean, num_classes=5, noise_rate=0.0, generator=seeded_generator(1)),
        clean,
    )


def test_validation_rejects_bad_arguments():
    g = seeded_generator(0)
    with pytest.raises(ValueError, match="noise_rate"):
        make_threshold(10, noise_rate=float("nan"), generator=g)
    with pytest.raises(ValueError, match="noise_rate"):
        make_gaussian_mixture(10, noise_rate=1.5, generator=g)
    with pytest.raises(TypeError, match="generator"):
        make_halfspace(10, generator=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="low"):
        make_interval(10, low=0.8, high=0.2, generator=g)
    with pytest.raises(ValueError):
        to_signed_labels(torch.tensor([0, 2]))
    assert torch.equal(to_signed_labels(torch.tensor([0, 1])), torch.tensor([-1.0, 1.0]))

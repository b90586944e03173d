"""DP-SGD for the linear head: closed-form clipping, the noise scale, Opacus's accountant, input checks."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from pate_stab.direct.dpsgd import (
    DPSGDConfig,
    clipped_noisy_gradient,
    dpsgd_epsilon,
    dpsgd_noise_multiplier,
    dpsgd_schedule,
    gaussian_noise,
    train_dpsgd_linear,
)
from tests._stats import ALPHA


def _task(n: int = 2000, d: int = 5, c: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centres = 3 * torch.randn(c, d, generator=g)
    y = torch.randint(0, c, (n,), generator=g)
    return centres[y] + torch.randn(n, d, generator=g), y


def test_closed_form_clipped_sum_equals_autograd_per_sample_gradients():
    x, y = _task(n=64, d=4)
    g = torch.Generator().manual_seed(1)
    w, b = torch.randn(3, 4, generator=g), torch.randn(3, generator=g)
    clip = 0.7
    sum_w, sum_b = torch.zeros_like(w), torch.zeros_like(b)
    for i in range(x.shape[0]):
        wr, br = w.clone().requires_grad_(True), b.clone().requires_grad_(True)
        torch.nn.functional.cross_entropy((x[i] @ wr.T + br).unsqueeze(0), y[i : i + 1]).backward()
        norm = math.sqrt(float((wr.grad**2).sum() + (br.grad**2).sum()))
        f = min(1.0, clip / (norm + 1e-6))
        sum_w += f * wr.grad
        sum_b += f * br.grad
    gw, gb = clipped_noisy_gradient(w, b, x, y, max_grad_norm=clip, noise_std=0.0, expected_batch_size=1.0,
                                    generator=torch.Generator())  # fmt: skip
    assert torch.allclose(gw, sum_w, atol=1e-5) and torch.allclose(gb, sum_b, atol=1e-5)


def test_noise_has_standard_deviation_sigma_times_clip():
    """On an empty batch the gradient is pure noise: Σ z²/(σC)² ~ χ²(k); α = 1e-6 two-sided (|z| < 4.9 sd)."""
    w, b = torch.zeros(10, 50), torch.zeros(10)
    empty_x, empty_y = torch.zeros(0, 50), torch.zeros(0, dtype=torch.int64)
    sigma, clip, batch = 1.3, 0.1, 7.0
    gen = torch.Generator().manual_seed(5)
    total, k = 0.0, 0
    for _ in range(40):
        gw, gb = clipped_noisy_gradient(w, b, empty_x, empty_y, max_grad_norm=clip, noise_std=sigma * clip,
                                        expected_batch_size=batch, generator=gen)  # fmt: skip
        z = torch.cat([gw.reshape(-1), gb]) * batch / (sigma * clip)
        total += float((z.double() ** 2).sum())
        k += z.numel()
    assert abs(total - k) < 4.9 * math.sqrt(2 * k), (total, k)  # a scale off by 10 % fails (~22 sd)


@pytest.mark.parametrize(("sigma", "q", "steps"), [(1.0, 0.01, 1000), (5.67, 8192 / 60000, 293), (0.8, 0.5, 10)])
def test_epsilon_is_opacus_rdp_accountant(sigma, q, steps):
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    for _ in range(steps):
        acc.step(noise_multiplier=sigma, sample_rate=q)
    assert dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=1e-5) == pytest.approx(
        acc.get_epsilon(delta=1e-5), rel=1e-12
    )


@pytest.mark.parametrize("eps", [1.0, 3.0, 8.0])
def test_noise_multiplier_meets_the_target(eps):
    q, steps = 8192 / 60000, 293
    sigma = dpsgd_noise_multiplier(epsilon=eps, delta=1e-5, sample_rate=q, steps=steps)
    spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=1e-5)
    assert eps - 0.02 <= spent <= eps


def test_training_learns_and_reports_its_guarantee():
    x, y = _task()
    cfg = DPSGDConfig(expected_batch_size=256, epochs=10, lr=2.0, momentum=0.9, max_grad_norm=1.0)
    model = train_dpsgd_linear(x, y, num_classes=3, epsilon=8.0, delta=1e-5, generator=torch.Generator().manual_seed(0),
                               public_size=2000, config=cfg)  # fmt: skip
    assert float((model.predict(x) == y).float().mean()) > 0.9
    assert model.steps == round(10 / (256 / 2000))
    assert model.epsilon == pytest.approx(
        dpsgd_epsilon(noise_multiplier=model.noise_multiplier, sample_rate=256 / 2000, steps=model.steps, delta=1e-5)
    )
    again = train_dpsgd_linear(x, y, num_classes=3, epsilon=8.0, delta=1e-5, generator=torch.Generator().manual_seed(0),
                               public_size=2000, config=cfg)  # fmt: skip
    assert torch.equal(model.weight, again.weight)


@pytest.mark.parametrize(
    ("change", "match"),
    [("label", r"labels must lie"), ("nan", "nan|NaN|finite"), ("eps0", "epsilon"), ("epsneg", "epsilon")],
)
def test_bad_input_is_refused(change, match):
    x, y = _task(n=300)
    eps = {"eps0": 0.0, "epsneg": -1.0}.get(change, 1.0)
    if change == "label":
        y[3] = 3
    if change == "nan":
        x[2, 1] = float("nan")
    with pytest.raises(ValueError, match=match):
        train_dpsgd_linear(x, y, num_classes=3, epsilon=eps, delta=1e-5, generator=torch.Generator(),
                           public_size=300, config=DPSGDConfig(expected_batch_size=64, epochs=1))  # fmt: skip


def test_opacus_engine_trains_a_cnn_and_reports_its_accountants_epsilon():
    from torch import nn

    from pate_stab.direct.opacus_engine import train_dpsgd_module

    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (512,), generator=g)
    x = torch.randn(512, 1, 8, 8, generator=g) * 0.3
    x[y == 1, :, :4, :] += 1.0  # class 1: bright top half

    def make() -> nn.Module:
        torch.manual_seed(0)  # the initialisation uses no private data
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 64, 2))

    cfg = DPSGDConfig(expected_batch_size=64, epochs=4, lr=0.5, momentum=0.5, max_grad_norm=1.0)
    out = train_dpsgd_module(
        make, x, y, num_classes=2, epsilon=8.0, delta=1e-5, generator=g, config=cfg, public_size=512
    )
    assert out.steps == 8 * 4 and out.sample_rate == 1 / 8
    assert out.epsilon == pytest.approx(
        dpsgd_epsilon(noise_multiplier=out.noise_multiplier, sample_rate=1 / 8, steps=32, delta=1e-5), rel=1e-9
    )
    assert out.epsilon <= 8.0
    with torch.no_grad():
        acc = float((out.module(x).argmax(1) == y).float().mean())
    assert acc > 0.9
    with pytest.raises(ValueError, match="labels must lie"):
        train_dpsgd_module(
            make, x, y + 1, num_classes=2, epsilon=8.0, delta=1e-5, generator=g, config=cfg, public_size=512
        )


def test_schedule_sigma_and_divisor_come_from_the_public_size_not_the_count(monkeypatch):
    """q = B / N, steps, σ and the divisor B of the noisy sum are the same for n = 700 and n = 699 (N = 1000)."""
    import pate_stab.direct.dpsgd as dpsgd

    seen: list[float] = []
    real = dpsgd.clipped_noisy_gradient

    def spy(*args, **kwargs):
        seen.append(kwargs["expected_batch_size"])
        return real(*args, **kwargs)

    monkeypatch.setattr(dpsgd, "clipped_noisy_gradient", spy)
    x, y = _task(n=700)
    cfg = DPSGDConfig(expected_batch_size=100, epochs=2, lr=1.0, momentum=0.0, max_grad_norm=1.0)
    runs = []
    for rows in (700, 699):
        seen.clear()
        m = train_dpsgd_linear(x[:rows], y[:rows], num_classes=3, epsilon=2.0, delta=1e-5,
                               generator=torch.Generator().manual_seed(0), public_size=1000, config=cfg)  # fmt: skip
        runs.append((m.sample_rate, m.steps, m.noise_multiplier))
        assert seen and set(seen) == {100.0}  # the divisor is B = q N, whatever n is
    assert runs[0] == runs[1] == (0.1, 20, runs[0][2])
    assert (runs[0][0], runs[0][1]) == dpsgd_schedule(1000, cfg)
    assert runs[0][2] == dpsgd_noise_multiplier(epsilon=2.0, delta=1e-5, sample_rate=0.1, steps=20)


def test_the_noisy_gradient_is_divided_by_the_batch_size_given():
    """(b) closed form: with zero weights, one record and no noise the step is clip(g) / B exactly."""
    x = torch.tensor([[3.0, 4.0]])
    y = torch.tensor([0])
    w, b = torch.zeros(2, 2), torch.zeros(2)
    g0 = torch.Generator().manual_seed(0)
    for batch in (1.0, 50.0):
        gw, gb = clipped_noisy_gradient(w, b, x, y, max_grad_norm=1e9, noise_std=0.0, expected_batch_size=batch,
                                        generator=g0)  # fmt: skip
        # p − e_y = (0.5 − 1, 0.5) = (−0.5, 0.5); g_W = (p − e_y) xᵀ
        expected = torch.tensor([[-0.5 * 3, -0.5 * 4], [0.5 * 3, 0.5 * 4]]) / batch
        assert torch.allclose(gw, expected) and torch.allclose(gb, torch.tensor([-0.5, 0.5]) / batch)


def test_a_public_size_below_the_batch_is_refused_and_a_small_set_only_warned():
    from pate_stab.direct.dpsgd import SmallPrivateSetWarning

    x, y = _task(n=120)
    cfg = DPSGDConfig(expected_batch_size=64, epochs=1)
    with pytest.raises(ValueError, match="exceeds the public size N=50"):
        train_dpsgd_linear(x, y, num_classes=3, epsilon=1.0, delta=1e-5, generator=torch.Generator(), public_size=50,
                           config=cfg)  # fmt: skip
    with pytest.warns(SmallPrivateSetWarning, match="may train badly"):  # n = 120 < N / 2: private, but a warning
        m = train_dpsgd_linear(x, y, num_classes=3, epsilon=1.0, delta=1e-5, generator=torch.Generator(),
                               public_size=1000, config=cfg)  # fmt: skip
    assert (m.sample_rate, m.steps) == dpsgd_schedule(1000, cfg)


def test_opacus_parts_divide_by_the_public_batch_take_empty_batches_and_print_no_secure_rng_warning(monkeypatch):
    """The engine's DPOptimizer divides by B whatever n is; Poisson batches may be empty; no PrivacyEngine warning."""
    import warnings

    from opacus.optimizers import DPOptimizer
    from torch import nn

    from pate_stab.direct.opacus_engine import engine_schedule, train_dpsgd_module

    divisors: list[float] = []
    real_init = DPOptimizer.__init__

    def spy(self, *args, **kwargs):
        divisors.append(kwargs["expected_batch_size"])
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(DPOptimizer, "__init__", spy)

    def make() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Flatten(), nn.Linear(16, 2))

    cfg = DPSGDConfig(expected_batch_size=2, epochs=1, lr=0.1, momentum=0.0, max_grad_norm=1.0)
    results = []
    for n in (30, 29):  # q = 1 / 100: most Poisson batches are empty
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(n, 1, 4, 4, generator=g), torch.randint(0, 2, (n,), generator=g)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = train_dpsgd_module(make, x, y, num_classes=2, epsilon=3.0, delta=1e-5, generator=g, config=cfg,
                                     public_size=200)  # fmt: skip
        assert not [w for w in caught if "Secure RNG" in str(w.message)]
        results.append((out.sample_rate, out.steps, out.noise_multiplier))
    assert divisors == [2, 2]
    assert results[0] == results[1] and results[0][:2] == engine_schedule(200, cfg) == (1 / 100, 100)


def _variance_rejects(draws: torch.Tensor, std: float) -> bool:
    """Two-sided normal test of the sample variance against std² (fourth moment 3 std⁴), at α = ALPHA."""
    n = draws.numel()
    z = float(stats.norm.isf(ALPHA / 2))
    bound = z * math.sqrt((3 * std**4 - std**4) / n)
    return abs(float((draws.double() ** 2).mean()) - std**2) > bound


@pytest.mark.statistical
@pytest.mark.parametrize("secure_mode", [False, True])
def test_gaussian_noise_has_the_asked_standard_deviation(secure_mode):
    """Opacus's secure_mode noise (four draws summed and halved) keeps N(0, std²); a sum divided by √2
    instead of 2 (variance doubled) is caught by the same test."""
    gen = torch.Generator().manual_seed(0)
    like = torch.zeros(400_000, dtype=torch.float64)
    draws = gaussian_noise(1.7, like, generator=gen, secure_mode=secure_mode)
    assert draws.shape == like.shape and not _variance_rejects(draws, 1.7)
    assert _variance_rejects(draws * math.sqrt(2), 1.7)
    assert _variance_rejects(draws * 0.97, 1.7)  # 3 % off the standard deviation is caught too


def test_opacus_engine_moves_the_private_images_to_the_device_once_not_per_batch(monkeypatch):
    """Every ``Tensor.to`` of an image-shaped tensor is recorded: the whole private set goes once,
    no per-step batch follows (the device is the CPU here; the calls are the same on a GPU)."""
    from torch import nn

    from pate_stab.direct.opacus_engine import train_dpsgd_module

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(96, 1, 5, 7, generator=g), torch.randint(0, 2, (96,), generator=g)
    moved: list[tuple[int, ...]] = []
    to = torch.Tensor.to

    def spy(self: torch.Tensor, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.dim() == 4 and tuple(self.shape[1:]) == (1, 5, 7):
            moved.append(tuple(self.shape))
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", spy)
    cfg = DPSGDConfig(expected_batch_size=16, epochs=2, lr=0.1, momentum=0.0, max_grad_norm=1.0)
    out = train_dpsgd_module(
        lambda: nn.Sequential(nn.Flatten(), nn.Linear(35, 2)), x, y, num_classes=2, epsilon=8.0, delta=1e-5,
        generator=g, config=cfg, public_size=96, device="cpu",
    )  # fmt: skip
    assert out.steps == 12
    assert moved == [(96, 1, 5, 7)]

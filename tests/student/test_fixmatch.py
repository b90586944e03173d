"""The FixMatch student: input checks, determinism, learning (its augmentations and configuration: tests/models)."""

from __future__ import annotations

import math

import pytest
import torch

from pate_stab.models import FixMatchConfig
from pate_stab.rng import seeded_generator
from pate_stab.student import FixMatchStudent, train_fixmatch


@pytest.fixture
def one_thread():
    """Training tests run on one thread (bit-identical reruns, steady timing); restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


TINY = {"batch_size": 8, "mu": 2, "channels": (4, 4), "hidden": (8,), "log_every": 5}


def _shapes(n: int, seed: int, size: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """Three classes of noisy 12 × 12 images: a horizontal bar, a vertical bar, a filled square,
    each at a random place; pixel noise N(0, 0.15²)."""
    g = seeded_generator(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    x = 0.15 * torch.randn(n, 1, size, size, generator=g)
    for i in range(n):
        a, b = (int(v) for v in torch.randint(1, size - 4, (2,), generator=g))
        if y[i] == 0:
            x[i, 0, a : a + 2, 2 : size - 2] += 1.0
        elif y[i] == 1:
            x[i, 0, 2 : size - 2, a : a + 2] += 1.0
        else:
            x[i, 0, a : a + 4, b : b + 4] += 1.0
    return x, y


# --- inputs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"labelled_x": torch.full((4, 1, 8, 8), math.nan)}, "NaN"),
        ({"unlabelled_x": torch.full((4, 1, 8, 8), math.inf)}, "NaN or infinite"),
        ({"labels": torch.tensor([0.0, 1.0, 0.0, 1.0])}, "hard class indices"),
        ({"labels": torch.tensor([0, 1, 2, 1])}, r"\[0, 1\]"),
        ({"labels": torch.tensor([0, -1, 0, 1])}, r"\[0, 1\]"),
        ({"labels": torch.tensor([0, 1, 0])}, "shape"),
        ({"labelled_x": torch.rand(4, 64)}, r"images \(n, C, H, W\)"),
        ({"unlabelled_x": torch.rand(4, 1, 6, 8)}, "one shape"),
        ({"labelled_x": torch.rand(4, 1, 2, 2), "unlabelled_x": torch.rand(4, 1, 2, 2)}, "4 × 4"),
    ],
)
def test_bad_inputs_raise_value_errors_naming_the_problem(change, message):
    args = {
        "labelled_x": torch.rand(4, 1, 8, 8),
        "labels": torch.tensor([0, 1, 0, 1]),
        "unlabelled_x": torch.rand(4, 1, 8, 8),
    }
    args |= change
    cfg = FixMatchConfig(steps=1, **TINY)
    with pytest.raises(ValueError, match=message):
        train_fixmatch(**args, num_classes=2, config=cfg, generator=seeded_generator(0), accelerator="cpu")


def test_wrong_types_raise_type_errors():
    x, y = torch.rand(4, 1, 8, 8), torch.tensor([0, 1, 0, 1])
    with pytest.raises(TypeError, match="generator"):
        train_fixmatch(x, y, x, num_classes=2, generator=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="FixMatchConfig"):
        train_fixmatch(x, y, x, num_classes=2, config={"steps": 1}, generator=seeded_generator(0))  # type: ignore[arg-type]


def test_empty_labelled_set_returns_the_untrained_network():
    cfg = FixMatchConfig(steps=5, **TINY)
    s = train_fixmatch(
        torch.rand(0, 1, 8, 8), torch.zeros(0, dtype=torch.long), torch.rand(10, 1, 8, 8),
        num_classes=3, config=cfg, generator=seeded_generator(0),
    )  # fmt: skip
    assert isinstance(s, FixMatchStudent) and s.history[0]["trained"] is False
    assert s.predict_proba(torch.rand(5, 1, 8, 8)).shape == (5, 3)


# --- training ------------------------------------------------------------------------------------


def test_same_generator_gives_bit_identical_weights(one_thread):
    x, y = _shapes(16, seed=1, size=8)
    pool, _ = _shapes(40, seed=2, size=8)
    cfg = FixMatchConfig(steps=20, threshold=0.5, **TINY)

    def weights(seed: int) -> dict[str, torch.Tensor]:
        student = train_fixmatch(
            x, y, pool, num_classes=3, config=cfg, generator=seeded_generator(seed), accelerator="cpu"
        )
        return student.state_dict()["weights"]

    a, b, c = weights(7), weights(7), weights(8)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_fixmatch_learns_from_ten_labels_and_pseudo_labels_the_pool(one_thread):
    """Chance is 1/3. A student that did not learn would sit near it: on 600 test images the
    accuracy of a chance-level predictor exceeds 0.45 with probability < 1e-8 (Hoeffding)."""
    x, y = _shapes(400 + 10, seed=11)
    labelled = torch.cat([(y == c).nonzero()[:4, 0] for c in range(3)])[:10]
    rest = torch.ones(len(y), dtype=torch.bool)
    rest[labelled] = False
    test_x, test_y = _shapes(600, seed=12)
    cfg = FixMatchConfig(steps=150, batch_size=10, mu=4, channels=(8, 16), hidden=(32,), threshold=0.9, log_every=25)
    s = train_fixmatch(
        x[labelled], y[labelled], x[rest], num_classes=3, config=cfg, generator=seeded_generator(13), accelerator="cpu"
    )
    assert s.accuracy(test_x, test_y) > 0.45 + 0.3  # clearly above chance
    assert [h["step"] for h in s.history] == [25, 50, 75, 100, 125, 150]
    assert max(h["mask_rate"] for h in s.history) > 0
    assert s.history[-1]["mask_rate"] > 0.5


def test_the_unlabelled_term_beats_the_labelled_images_alone(one_thread):
    """Same seeds, λ_u = 1 against λ_u = 0 (supervised on the 10 weakly augmented images). The
    runs are deterministic; measured over generator seeds 13–15: FixMatch 0.998–1.000,
    supervised alone 0.90–0.96 on these 600 test images."""
    x, y = _shapes(410, seed=11)
    labelled = torch.cat([(y == c).nonzero()[:4, 0] for c in range(3)])[:10]
    rest = torch.ones(len(y), dtype=torch.bool)
    rest[labelled] = False
    test_x, test_y = _shapes(600, seed=12)
    accuracy = {}
    for lambda_u in (0.0, 1.0):
        cfg = FixMatchConfig(
            steps=150, batch_size=10, mu=4, channels=(8, 16), hidden=(32,), threshold=0.9, lambda_u=lambda_u
        )
        s = train_fixmatch(
            x[labelled], y[labelled], x[rest], num_classes=3, config=cfg, generator=seeded_generator(14),
            accelerator="cpu",
        )  # fmt: skip
        accuracy[lambda_u] = s.accuracy(test_x, test_y)
    assert accuracy[1.0] > 0.97
    assert accuracy[1.0] > accuracy[0.0] + 0.02


def test_images_move_to_the_device_once_not_per_batch(monkeypatch, one_thread):
    """Every ``Tensor.to`` of an image-shaped tensor is recorded: the labelled and the unlabelled
    images go to the device once each, whole, and no per-step batch of images follows (the device
    is the CPU here; Lightning's per-batch transfer makes the same calls on a GPU)."""
    x, y = torch.randn(10, 1, 8, 9), torch.randint(0, 2, (10,))
    pool = torch.randn(30, 1, 8, 9)
    moved: list[tuple[int, ...]] = []
    to = torch.Tensor.to

    def spy(self: torch.Tensor, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.dim() == 4 and tuple(self.shape[1:]) == (1, 8, 9):
            moved.append(tuple(self.shape))
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", spy)
    cfg = FixMatchConfig(steps=6, threshold=0.5, **TINY)  # two classes: every pseudo-label passes
    student = train_fixmatch(x, y, pool, num_classes=2, config=cfg, generator=seeded_generator(0), accelerator="cpu")
    assert student.history[-1]["step"] == 6 and student.history[-1]["mask_rate"] == 1.0
    assert sorted(moved) == [(10, 1, 8, 9), (30, 1, 8, 9)]

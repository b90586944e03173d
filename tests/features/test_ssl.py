"""SimCLR encoder training on a tiny problem: determinism, loss decrease, checkpoint resume."""

import pytest
import torch

import pate_stab.features.ssl as ssl_module
from pate_stab.features import SSLConfig, SSLFeatures, augment, nt_xent_loss, train_ssl_encoder

TINY = SSLConfig(width=4, embed_dim=8, proj_dim=4, epochs=6, batch_size=16, lr=1e-2, cutout_size=4)


def _images(n: int = 32, seed: int = 0) -> torch.Tensor:
    """Blobs at random positions: a tiny data set with structure to learn."""
    g = torch.Generator().manual_seed(seed)
    i, j = torch.arange(12.0)[:, None], torch.arange(12.0)[None, :]
    centres = torch.randint(3, 9, (n, 2), generator=g).float()
    width = 1 + 2 * torch.rand(n, generator=g)
    d2 = (i - centres[:, 0, None, None]) ** 2 + (j - centres[:, 1, None, None]) ** 2
    return torch.exp(-d2 / width[:, None, None] ** 2)[:, None]


def test_nt_xent_prefers_matching_pairs():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(8, 5, generator=g)
    matched = nt_xent_loss(z, z + 0.01 * torch.randn(8, 5, generator=g), temperature=0.5)
    shuffled = nt_xent_loss(z, z[torch.randperm(8, generator=g)], temperature=0.5)
    assert matched < shuffled
    # with all projections equal, every one of the 2B − 1 candidates is equally likely
    same = nt_xent_loss(torch.ones(4, 3), torch.ones(4, 3), temperature=0.5)
    assert same.item() == pytest.approx(torch.log(torch.tensor(7.0)).item(), rel=1e-6)


def test_augment_is_seeded_and_keeps_shape():
    x = _images(5)
    a = augment(x, TINY, generator=torch.Generator().manual_seed(1))
    b = augment(x, TINY, generator=torch.Generator().manual_seed(1))
    c = augment(x, TINY, generator=torch.Generator().manual_seed(2))
    assert a.shape == x.shape
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.allclose(a, c)


def test_training_is_deterministic_and_the_loss_decreases():
    x = _images()
    enc1, hist1 = train_ssl_encoder(x, TINY, generator=torch.Generator().manual_seed(3))
    enc2, hist2 = train_ssl_encoder(x, TINY, generator=torch.Generator().manual_seed(3))
    assert hist1 == hist2
    for p, q in zip(enc1.state_dict().values(), enc2.state_dict().values(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert len(hist1) == TINY.epochs
    assert sum(hist1[-2:]) < sum(hist1[:2])


def test_interrupted_training_resumes_to_the_same_encoder(tmp_path, monkeypatch):
    x = _images()
    full, hist_full = train_ssl_encoder(x, TINY, generator=torch.Generator().manual_seed(4))
    ckpt = tmp_path / "enc.pt"
    calls = {"n": 0}

    def interrupted_loss(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 8:  # 2 steps per epoch: interrupt in the middle of epoch 4
            raise KeyboardInterrupt
        return nt_xent_loss(*args, **kwargs)

    monkeypatch.setattr(ssl_module, "nt_xent_loss", interrupted_loss)
    with pytest.raises(KeyboardInterrupt):
        train_ssl_encoder(x, TINY, generator=torch.Generator().manual_seed(4), checkpoint=ckpt)
    monkeypatch.undo()
    assert len(torch.load(ckpt, weights_only=False)["history"]) == 3
    # a fresh generator with another seed: the checkpoint's generator state replaces it
    resumed, hist = train_ssl_encoder(x, TINY, generator=torch.Generator().manual_seed(99), checkpoint=ckpt)
    assert hist == hist_full
    for p, q in zip(full.state_dict().values(), resumed.state_dict().values(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_checkpoint_of_another_configuration_is_rejected(tmp_path):
    x = _images()
    ckpt = tmp_path / "enc.pt"
    train_ssl_encoder(x, SSLConfig(**{**TINY.to_dict(), "epochs": 1}), generator=torch.Generator(), checkpoint=ckpt)
    with pytest.raises(ValueError, match="another configuration"):
        train_ssl_encoder(x, SSLConfig(**{**TINY.to_dict(), "width": 5}), generator=torch.Generator(), checkpoint=ckpt)


def test_ssl_features_save_load_and_row_independence():
    x = _images(32)
    feats = SSLFeatures(TINY, generator=torch.Generator().manual_seed(5), pca_dim=4).fit(x)
    out = feats.transform(x[:6])
    assert out.shape == (6, 4)
    torch.testing.assert_close(torch.cat([feats.transform(x[i : i + 1]) for i in range(6)]), out, rtol=1e-5, atol=1e-5)
    other = SSLFeatures(TINY, pca_dim=4)
    other.load_state_dict(feats.state_dict())
    torch.testing.assert_close(other.transform(x[:6]), out)
    assert other.meta["fitted_on"] == "public pool (32 images, no labels)" and other.meta["dim"] == 4


def test_ssl_errors():
    with pytest.raises(TypeError, match="generator"):
        SSLFeatures(TINY).fit(_images(8))
    with pytest.raises(ValueError, match="dimensions"):
        train_ssl_encoder(torch.rand(8, 12, 12), TINY, generator=torch.Generator())
    with pytest.raises(ValueError, match="NaN"):
        train_ssl_encoder(torch.full((8, 1, 12, 12), float("nan")), TINY, generator=torch.Generator())
    with pytest.raises(ValueError, match="temperature"):
        SSLConfig(temperature=float("nan"))
    with pytest.raises(ValueError, match="batch_size"):
        SSLConfig(batch_size=1)


def test_ssl_features_move_each_image_set_to_the_device_once(monkeypatch):
    """On a GPU the public images move there once (training, then the projection's fit), every
    other set once, and no batch of images follows (the stand-in GPU of tests/device_moves.py keeps
    the tensors on the CPU). On the CPU the features are bit-identical to a CPU fit."""
    from tests.device_moves import fake_cuda_moves

    public, private = _images(32, seed=0), _images(20, seed=1)

    def features(device: str) -> tuple[torch.Tensor, torch.Tensor, SSLFeatures]:
        f = SSLFeatures(TINY, generator=torch.Generator().manual_seed(5), pca_dim=4, device=device)
        f.fit(public)
        return f.transform(private), f.transform(public), f

    cpu_private, cpu_public, cpu = features("cpu")
    moves = fake_cuda_moves(monkeypatch)
    gpu_private, gpu_public, gpu = features("cuda")
    assert sorted(moves.with_trailing((1, 12, 12))) == [(20, 1, 12, 12), (32, 1, 12, 12), (32, 1, 12, 12)]
    # the encoder's weights moved too (before training), each once
    conv = next(gpu.encoder.parameters())
    assert moves.count(tuple(conv.shape)) >= 1
    torch.testing.assert_close(gpu_private, cpu_private, rtol=0, atol=0)
    torch.testing.assert_close(gpu_public, cpu_public, rtol=0, atol=0)
    assert gpu.history == cpu.history
    assert gpu_private.device.type == "cpu"
    state = gpu.state_dict()
    assert all(v.device.type == "cpu" for v in state["encoder"].values())

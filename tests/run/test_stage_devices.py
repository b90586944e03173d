"""Each tensor stage of a run on the run's GPU: the public PCA (data stage), the kNN graph and the
propagation teachers, the votes, and the SSL features. Without a GPU here, the stand-in of
tests/device_moves.py records which tensors are sent to CUDA (and keeps them on the CPU): a stage
left on the CPU sends nothing, a stage that copies per batch sends slices. The results equal the
CPU run's bit for bit."""

from __future__ import annotations

import torch

import pate_stab.run.data as run_data
import pate_stab.run.features as run_features
from pate_stab.run.prepare import prepare
from pate_stab.teachers import PoolVotes, PropagationTeachers
from tests.device_moves import fake_cuda_moves
from tests.run.test_features_stage import fake_splits, small

REQUESTS = (torch.arange(10), torch.arange(5, 40), torch.tensor([199]))


def _prepared(tmp_path, name: str, accelerator: str, **kw):
    prep = prepare(small(tmp_path, name, accelerator=accelerator, **kw))
    assert prep.votes is not None
    return prep, [prep.votes.histograms(i) for i in REQUESTS]


def _cpu_histograms(prep) -> list[torch.Tensor]:
    """The votes of CPU propagation teachers on the same features and shards as ``prep``'s teachers
    (a GPU run's content keys read the images, a CPU run's the features: their partitions differ)."""
    task, teachers = prep.task, prep.teachers
    shard_of = teachers.shard_of.cpu()
    shards = [torch.nonzero(shard_of == j).flatten() for j in range(teachers.num_teachers)]
    cpu = PropagationTeachers(task.public_x, task.private_x, task.private_y, shards, num_classes=task.num_classes,
                              spec=teachers.spec)  # fmt: skip
    votes = PoolVotes(cpu, task.public_x, task.num_classes)
    return [votes.histograms(i) for i in REQUESTS]


def test_pca_graph_and_votes_run_on_the_runs_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    cpu, _ = _prepared(tmp_path, "cpu", "cpu", features="pca", pca_dim=10)
    assert cpu.devices["teachers"] == "cpu" and cpu.votes is not None and cpu.votes.device == "cpu"
    moves = fake_cuda_moves(monkeypatch)
    gpu, gpu_hist = _prepared(tmp_path, "gpu", "gpu", features="pca", pca_dim=10)
    monkeypatch.undo()
    cpu_hist = _cpu_histograms(gpu)
    # the PCA: every split's images once (private, public, evaluation)
    assert sorted(moves.with_trailing((1, 8, 8))) == [(150, 1, 8, 8), (200, 1, 8, 8), (1500, 1, 8, 8)]
    # the graph (public), the private affinities, the pool for the votes: whole, once each; no request's rows
    assert sorted(moves.with_trailing((10,))) == [(200, 10), (200, 10), (1500, 10)]
    assert gpu.devices["data"] == "cpu, cuda (pca)" and gpu.devices["teachers"] == "cuda"
    assert gpu.votes is not None and gpu.votes.device == "cuda"
    for split in ("private_x", "public_x", "eval_x"):
        assert torch.equal(getattr(gpu.task, split), getattr(cpu.task, split)), split
    for a, b in zip(cpu_hist, gpu_hist, strict=True):
        assert torch.equal(a, b)


def test_ssl_features_run_on_the_runs_gpu(tmp_path, monkeypatch):
    """The feature stage hands the run's GPU to the SSL extractor (each split's images move once);
    its cache key names the device (the encoder's pixel noise is drawn there), a CPU key is unchanged."""
    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    made: list[object] = []
    real_make = run_features.make_features

    def make(name, **kwargs):
        made.append(kwargs.get("device"))
        return real_make(name, **kwargs)

    monkeypatch.setattr(run_features, "make_features", make)
    kw = dict(features="ssl", ssl_epochs=1, pca_dim=4)
    cpu, _ = _prepared(tmp_path, "cpu", "cpu", **kw)
    moves = fake_cuda_moves(monkeypatch)
    gpu, gpu_hist = _prepared(tmp_path, "gpu", "gpu", **kw)
    assert made == ["cpu", "cuda"]
    monkeypatch.undo()
    cpu_hist = _cpu_histograms(gpu)
    images = moves.with_trailing((1, 8, 8))
    # public: once for training and the projection, once more for its features; private, evaluation once
    assert sorted(images) == [(150, 1, 8, 8), (200, 1, 8, 8), (200, 1, 8, 8), (1500, 1, 8, 8)]
    assert gpu.devices["features"] == "cuda" and gpu.devices["teachers"] == "cuda"
    cpu_cache = cpu.task.feature_map["cache"]
    assert cpu_cache != gpu.task.feature_map["cache"]
    for split in ("private_x", "public_x", "eval_x"):  # the stand-in GPU draws the CPU's noise: equal here
        assert torch.equal(getattr(gpu.task, split), getattr(cpu.task, split)), split
    for a, b in zip(cpu_hist, gpu_hist, strict=True):
        assert torch.equal(a, b)


def test_content_keys_of_gpu_features_read_the_records_as_loaded(tmp_path, monkeypatch):
    """Features computed in batches may differ in their last bits with the other records of their
    batch and with the machine, so content keys hash each private image as loaded (and its label),
    never the features, on every device: the CPU and the GPU run give the same partition."""
    import pate_stab.run.prepare as run_prepare
    from pate_stab.teachers import record_keys_from_tensors

    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    hashed: list[object] = []
    real_partition = run_prepare.partition_indices

    def partition_indices(keys, *args, **kwargs):
        hashed.append(keys)
        return real_partition(keys, *args, **kwargs)

    monkeypatch.setattr(run_prepare, "partition_indices", partition_indices)
    cpu = prepare(small(tmp_path, "cpu", accelerator="cpu", features="pca", pca_dim=10))
    moves = fake_cuda_moves(monkeypatch)
    gpu = prepare(small(tmp_path, "gpu", accelerator="gpu", features="pca", pca_dim=10))
    assert moves.shapes  # the PCA ran on the (stand-in) GPU
    assert gpu.task.private_images is not None
    for keys, task in zip(hashed, (cpu.task, gpu.task), strict=True):
        assert task.private_images is not None
        assert keys == record_keys_from_tensors(task.private_images, task.private_y)  # as loaded
        assert keys != record_keys_from_tensors(task.private_x, task.private_y)  # not the features
    assert hashed[0] == hashed[1]  # one partition whichever device computed the features


def _spread_outputs(prep) -> list[torch.Tensor]:
    """The spread selector's shares and mass after two rounds of released outputs (answered and ⊥),
    and the spread student's pseudo-labels."""
    from pate_stab.run.release import spread_selector
    from pate_stab.run.student import spread_pseudo_labels
    from pate_stab.student import StudentTargets

    spread = spread_selector(prep)
    first, second = torch.arange(0, 40, 4), torch.arange(0, 80, 4)
    labels = torch.tensor([0, 1, -1, 1, 0, -1, 0, 1, 1, 0])
    out = [*spread(first, labels), *spread(second, torch.cat([labels, labels.flip(0)]))]
    answered = torch.tensor([0, 1, 3, 4, 6, 7, 8, 9])
    targets = StudentTargets(torch.arange(answered.numel()), labels[answered], soft=False, num_bottom=0)
    out += [*spread_pseudo_labels(prep, first[answered], targets, first[labels < 0], threshold=0.5)]
    return out


def test_spread_graph_moves_once_and_spreading_runs_on_the_runs_gpu(tmp_path, monkeypatch):
    """The "spread" query selection and the spread student spread labels over the pool graph on the
    run's GPU: a run without propagation teachers builds the graph there from the pool's inputs, which
    move once, whole; each round's seeds are small; the shares come back to the CPU equal to the CPU
    run's bit for bit. The release and student stage lines name the devices used."""
    from dataclasses import replace

    import pate_stab.run.student_base as student_base
    import pate_stab.student.spreading as spreading
    from pate_stab.run.prepare import pool_graph
    from pate_stab.run.release import release_device
    from pate_stab.run.student import student_device

    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    kw = dict(features="pca", pca_dim=10, query_selection="spread", student_method="spread")
    cpu = replace(prepare(small(tmp_path, "cpu", accelerator="cpu", **kw)), teachers=None, votes=None)
    cpu_out = _spread_outputs(cpu)
    assert cpu.graph_device == "cpu" and release_device(cpu) == "cpu" and student_device(cpu) == "cpu"
    # under an MPS accelerator the graph stays on the CPU (no sparse kernels there): both named
    mps = replace(cpu, config=replace(cpu.config, accelerator="mps"))
    assert student_device(mps) == "mps, cpu (spread)"

    moves = fake_cuda_moves(monkeypatch)
    gpu_prop = prepare(small(tmp_path, "gpu", accelerator="gpu", **kw))
    gpu = replace(gpu_prop, teachers=None, votes=None)  # as a run with vectorised teachers
    before = len(moves.shapes)
    used: list[torch.Tensor] = []
    real_scores = spreading.spread_scores

    def spread_scores(adjacency, *args, **kwargs):
        used.append(adjacency)
        return real_scores(adjacency, *args, **kwargs)

    monkeypatch.setattr(spreading, "spread_scores", spread_scores)
    monkeypatch.setattr(student_base, "spread_scores", spread_scores)
    gpu_out = _spread_outputs(gpu)
    assert moves.shapes[before:] == [(200, 10)]  # the pool's inputs, once, whole; nothing per round
    assert gpu.graph is not None and gpu.graph_device == "cuda"
    assert len(used) == 3 and all(a is gpu.graph.adjacency for a in used)  # every spread on the device graph
    assert release_device(gpu) == "cpu, cuda (selection)" and release_device(gpu) == "cpu"  # read once
    assert student_device(gpu) == "cuda"
    # propagation teachers: their graph, already on the device, is used as it is (no move)
    before = len(moves.shapes)
    assert isinstance(gpu_prop.teachers, PropagationTeachers)
    assert pool_graph(gpu_prop) is gpu_prop.teachers.graph and gpu_prop.graph_device == "cuda"
    assert moves.shapes[before:] == []
    monkeypatch.undo()
    for a, b in zip(cpu_out, gpu_out, strict=True):
        assert a.device.type == "cpu" and torch.equal(a, b)

"""The package's mechanisms as samplers: ``(input, n, generator) → n outputs``, vectorised over runs.

Each function here returns a :data:`~pate_stab.audit.harness.Mechanism` that
:func:`~pate_stab.audit.harness.dp_test` runs 10^5 times on each input of a neighbouring pair.
Where a mechanism is an online object that cannot be run so often cheaply (the releasers, the
sparse vector), the sampler runs its computation vectorised over runs with the library's own parts
(:func:`~pate_stab.privacy.mechanisms.sparse_vector.above_threshold_scan`,
:func:`~pate_stab.aggregation.votes.distance_to_instability`, the noise samplers); the tests of
those modules check that the vectorised and online forms agree. Secure-noise samplers draw from a
:class:`~pate_stab.privacy.noise.secure.SeededRandomSource` seeded from the generator, so an audit
is reproducible.

The first group samples the package's correct mechanisms; the second, deliberately broken
variants (a wrong noise scale, a released noisy value) that the harness must flag. Which inputs,
claims and relations each is tested with is :mod:`pate_stab.audit.mechanism_cases`.
"""

from __future__ import annotations

from typing import Any

import torch

from pate_stab.aggregation.private_knn import NeighbourIndex, draw_coins, exact_sampling_rate
from pate_stab.aggregation.votes import distance_to_instability, top_label, vote_histogram
from pate_stab.audit.harness import Mechanism
from pate_stab.erm.losses import HuberHingeLoss
from pate_stab.erm.output_perturbation import output_perturbation, output_perturbation_sensitivity
from pate_stab.erm.solver import solve_erm
from pate_stab.privacy.mechanisms.alibi import ALIBI_RESOLUTION, alibi_release
from pate_stab.privacy.mechanisms.randomized_response import rr_optimal_k, rr_top_k
from pate_stab.privacy.mechanisms.sparse_vector import above_threshold_scan
from pate_stab.privacy.noise.secure import SeededRandomSource, discrete_gaussian, discrete_laplace, snapping
from pate_stab.privacy.noise.seeded import l2_laplace_vectors, laplace

__all__ = [
    "laplace_count",
    "sparse_vector",
    "stability_test",
    "hard_releaser",
    "aggregator",
    "votes_file_aggregator",
    "secure_aggregator",
    "secure_discrete_gaussian",
    "huber_output_perturbation",
    "secure_discrete_laplace",
    "secure_snapping",
    "secure_sparse_vector",
    "rr_with_prior_sampler",
    "alibi",
    "alibi_difference",
    "as_float",
    "svt_query_scale",
    "class_count_from_votes",
    "noisy_max",
    "laplace_scale",
    "discrete_laplace_scale",
    "stability_test_noise",
    "knn_pair",
    "private_knn_counts",
]

# --------------------------------------------------------------------------- correct mechanisms


def laplace_count(epsilon: float) -> Mechanism:
    def mech(value: float, n: int, gen: torch.Generator) -> torch.Tensor:
        return value + laplace(1.0 / epsilon, n, generator=gen)

    return mech


def sparse_vector(noise_scale: float, max_unstable: int, threshold: float = 0.0) -> Mechanism:
    def mech(values: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        vals = torch.as_tensor(values, dtype=torch.float64).expand(n, -1)
        m = vals.shape[1]
        qn = laplace(2 * noise_scale, (n, m), generator=gen)
        tn = laplace(noise_scale, (n, max_unstable), generator=gen)
        return above_threshold_scan(vals, qn, tn, threshold=threshold, max_failures=max_unstable).outputs

    return mech


def stability_test(epsilon: float, threshold: float) -> Mechanism:
    """BTT18 Alg 2 on one vote histogram: the argmax if dist + Lap(1/ε) > Γ, else ⊥ (code 0)."""

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        c = torch.as_tensor(counts, dtype=torch.int64)
        dist = distance_to_instability(c).to(torch.float64)
        passed = dist + laplace(1.0 / epsilon, (n, 1), generator=gen) > threshold
        return torch.where(passed, top_label(c) + 1, 0)[:, 0]

    return mech


def hard_releaser(noise_scale: float, threshold: float, max_unstable: int) -> Mechanism:
    """StabilityReleaser's computation: vote histograms → argmax or ⊥ through sparse vector."""
    scan = sparse_vector(noise_scale, max_unstable, threshold)

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        c = torch.as_tensor(counts, dtype=torch.int64)
        codes = scan(distance_to_instability(c).to(torch.float64), n, gen)
        labels = top_label(c).expand(n, -1)
        return torch.where(codes == 1, labels, torch.full_like(labels, -1)) + 1

    return mech


def aggregator(agg: Any) -> Mechanism:
    return lambda counts, n, gen: agg.sample(counts, n, generator=gen)


def votes_file_aggregator(agg: Any, num_classes: int) -> Mechanism:
    """A votes file's teacher predictions (k, 1) → their histogram over the declared C → ``agg`` on the
    one query: what ``release --votes --num-classes C`` computes (``load_votes``' ``vote_histogram``)."""

    def mech(predictions: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        counts = vote_histogram(torch.as_tensor(predictions, dtype=torch.int64), num_classes)
        return agg.sample(counts[0], n, generator=gen)

    return mech


def secure_aggregator(make: Any) -> Mechanism:
    """A secure aggregator built per call on a source seeded from ``gen`` (reproducible audits)."""

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        source = SeededRandomSource(int(torch.randint(0, 2**62, (1,), generator=gen)))
        return make(source).sample(counts, n)

    return mech


def secure_discrete_gaussian(sigma: float) -> Mechanism:
    """A counting query plus N_Z(0, σ'²) (CKS20 Alg 3), as floats so half-line events are tried."""

    def mech(value: int, n: int, gen: torch.Generator) -> torch.Tensor:
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        return (value + discrete_gaussian(sigma, n, source=SeededRandomSource(seed))).to(torch.float64)

    return mech


def huber_output_perturbation(epsilon: float) -> Mechanism:
    """Output perturbation (Chaudhuri et al. 2011 Alg 1) on worst-case 1-D replace-one neighbours."""
    n, lam = 20, 10.0
    x = torch.ones((n, 1), dtype=torch.float64)
    y = torch.ones(n, dtype=torch.float64)
    y_flip = y.clone()
    y_flip[0] = -1.0
    sens = output_perturbation_sensitivity(lipschitz=1.0, lam=lam, n=n)
    loss = HuberHingeLoss()
    theta = {
        "D": solve_erm(x, y, loss=loss, lam=lam, tol=1e-6 * sens).weights,
        "D'": solve_erm(x, y_flip, loss=loss, lam=lam, tol=1e-6 * sens).weights,
    }
    # the noise scale the public function uses on this data (it covers the solver's tolerance)
    scale = output_perturbation(x, y, epsilon=epsilon, lam=lam, loss=loss, generator=torch.Generator()).noise_scale

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        return theta[key] + l2_laplace_vectors(scale, 1, num_samples=num, generator=gen)

    return mech


def secure_discrete_laplace(scale: float) -> Mechanism:
    def mech(value: int, n: int, gen: torch.Generator) -> torch.Tensor:
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        return value + discrete_laplace(scale, n, source=SeededRandomSource(seed))

    return mech


def secure_snapping(noise_scale: float, bound: float) -> Mechanism:
    def mech(value: float, n: int, gen: torch.Generator) -> torch.Tensor:
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        return snapping(value, noise_scale=noise_scale, bound=bound, size=n, source=SeededRandomSource(seed))

    return mech


def secure_sparse_vector(noise_scale: int, threshold: int) -> Mechanism:
    """AboveThreshold segment (T = 1) with exact discrete Laplace noise, vectorised over runs."""

    def mech(values: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        src = SeededRandomSource(int(torch.randint(0, 2**62, (1,), generator=gen)))
        vals = torch.as_tensor(values, dtype=torch.int64)
        m = vals.numel()
        level = threshold + discrete_laplace(noise_scale, n, source=src)  # (n,)
        noisy = vals + discrete_laplace(2 * noise_scale, n * m, source=src).reshape(n, m)
        fails = noisy <= level[:, None]
        first = torch.where(fails.any(1), fails.to(torch.int8).argmax(1), torch.tensor(m))
        return first  # the output pattern is determined by the first ⊥

    return mech


def rr_with_prior_sampler(
    prior: Any, epsilon: float, *, keep_epsilon: float | None = None, label_in_set: bool = False
) -> Mechanism:
    """RRWithPrior (Ghazi et al. 2021, Alg 2) on one label with a fixed prior, exact draws from a
    source seeded from ``gen``; the input is the true label. Broken variants: ``keep_epsilon``, the
    keep probability of that ε instead of ``epsilon`` (k* still chosen at ``epsilon``); ``label_in_set``,
    a set that reads the label (a label outside the top-k* takes the set's last place, so it is kept)."""
    p = torch.as_tensor(prior, dtype=torch.float64)[None, :]
    k, order = rr_optimal_k(p, epsilon)

    def mech(label: int, n: int, gen: torch.Generator) -> torch.Tensor:
        src = SeededRandomSource(int(torch.randint(0, 2**62, (1,), generator=gen)))
        row = order[0].clone()
        if label_in_set and label not in row[: int(k)].tolist():
            row[row == label] = row[int(k) - 1].clone()
            row[int(k) - 1] = label
        labels = torch.full((n,), int(label), dtype=torch.int64)
        return rr_top_k(labels, row.expand(n, -1), k.expand(n), keep_epsilon or epsilon, source=src)

    return mech


def alibi(epsilon: float, num_classes: int, *, scale_epsilon: float | None = None) -> Mechanism:
    """ALIBI's release (Malek et al. 2021; :func:`~pate_stab.privacy.mechanisms.alibi.alibi_release`) of one label,
    exact draws from a source seeded from ``gen``. Broken variant: ``scale_epsilon``, the noise scale
    of that ε (e.g. 2ε: sensitivity M assumed instead of 2M)."""

    def mech(label: int, n: int, gen: torch.Generator) -> torch.Tensor:
        src = SeededRandomSource(int(torch.randint(0, 2**62, (1,), generator=gen)))
        return alibi_release(torch.full((n,), int(label)), num_classes, scale_epsilon or epsilon, source=src)

    return mech


def alibi_difference(t: torch.Tensor) -> torch.Tensor:
    """min(z_0 − M, −z_1) as a float: on the event {≥ 0} = {z_0 ≥ M, z_1 ≤ 0} the likelihood ratio of
    labels 0 and 1 is e^{M/t}·e^{M/t} = e^{2M/t} exactly (both coordinates that a label change moves)."""
    return torch.minimum(t[:, 0] - ALIBI_RESOLUTION, -t[:, 1]).to(torch.float64)


def as_float(t: torch.Tensor) -> torch.Tensor:
    """Integer outputs as floats, so that dp_test also tries half-line events {X <= c}."""
    return t.to(torch.float64)


# --------------------------------------------------------------------------- broken variants


def svt_query_scale(noise_scale: float, query_scale: float) -> Mechanism:
    def mech(values: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        vals = torch.as_tensor(values, dtype=torch.float64).expand(n, -1)
        qn = laplace(query_scale, vals.shape, generator=gen)
        tn = laplace(noise_scale, (n, 1), generator=gen)
        return above_threshold_scan(vals, qn, tn, threshold=0.0, max_failures=1).outputs

    return mech


def class_count_from_votes(agg: Any) -> Mechanism:
    """:func:`votes_file_aggregator` with C read from the votes (largest label + 1), as ``release --votes``
    did without ``--num-classes``: the output range then depends on one teacher's vote."""

    def mech(predictions: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        pred = torch.as_tensor(predictions, dtype=torch.int64)
        return votes_file_aggregator(agg, max(int(pred.max()) + 1, 2))(pred, n, gen)

    return mech


def noisy_max(epsilon: float, *, return_value: bool) -> Mechanism:
    """Report noisy max over counting queries with Lap(1/ε) (Dwork & Roth 2014, Claim 3.9)."""

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        c = torch.as_tensor(counts, dtype=torch.float64).expand(n, -1)
        noisy = c + laplace(1.0 / epsilon, c.shape, generator=gen)
        return noisy.max(dim=1).values if return_value else noisy.argmax(dim=1)

    return mech


def laplace_scale(scale: float) -> Mechanism:
    def mech(value: float, n: int, gen: torch.Generator) -> torch.Tensor:
        return value + laplace(scale, n, generator=gen)

    return mech


def discrete_laplace_scale(scale: float) -> Mechanism:
    inner = secure_discrete_laplace(scale)
    return lambda value, n, gen: inner(value, n, gen).to(torch.float64)


def stability_test_noise(noise_scale: float, threshold: float) -> Mechanism:
    """BTT18 Alg 2 with distance noise Lap(noise_scale)."""
    return stability_test(1.0 / noise_scale, threshold)


def knn_pair(*, far: int = 30) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """A tight add/remove pair for Private-kNN with K = 1 and the query at the origin: D′ holds ``far``
    records of class 1 at distance 1 (one of them is almost surely sampled), D adds one record of class 0
    at distance 0.5, which, when sampled, pushes the class-1 vote out: the votes move by ℓ2 √2."""
    far_x = torch.zeros(far, 2)
    far_x[:, 0] = 1.0
    near_x = torch.tensor([[0.5, 0.0]])
    d_prime = (far_x, torch.ones(far, dtype=torch.int64))
    d = (torch.cat([near_x, far_x]), torch.cat([torch.zeros(1, dtype=torch.int64), d_prime[1]]))
    return d, d_prime


def private_knn_counts(agg: Any, *, draw_rate: float | None = None, sigma: float | None = None) -> Mechanism:
    """Private-kNN's one query on a small private set ``(features, labels)``: fresh Poisson coins per
    run (at ``draw_rate``, default the aggregator's exact rate), the votes of the K nearest sampled
    records, and the noisy difference of the first two counts (seeded Gaussian noise of σ, default the
    aggregator's). The released label is a post-processing of these noisy counts, which the claim covers.
    ``draw_rate`` and ``sigma`` exist for the broken variants (``mechanism_cases.mutation_cases``)."""

    rate = exact_sampling_rate(agg.sampling_rate if draw_rate is None else draw_rate)
    scale = agg.sigma if sigma is None else sigma

    def mech(records: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        x, y = records
        index = NeighbourIndex(x, y, num_classes=2, block=n)
        query = torch.zeros(n, x.shape[1])
        counts = index.histograms(query, lambda b: draw_coins(b, index.size, rate, generator=gen),
                                  num_neighbours=agg.num_neighbours).to(torch.float64)  # fmt: skip
        noisy = counts + torch.randn(counts.shape, generator=gen, dtype=torch.float64) * scale
        return noisy[:, 0] - noisy[:, 1]

    return mech

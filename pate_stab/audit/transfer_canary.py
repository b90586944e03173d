"""One-run canary audit (Steinke, Nasr & Jagielski 2023) of the knowledge-transfer pipeline.

What runs. The pipeline's own stages: the record-keyed partition
(:func:`~pate_stab.teachers.partition.shard_of_records`), vote histograms, an aggregator built by
:func:`~pate_stab.aggregation.registry.make_releaser` exactly as the pipeline builds it (the
stability releaser in either noise mode, or LNMax), the student of BTT18 Alg 5
(:func:`~pate_stab.student.train_student` on :func:`~pate_stab.student.hard_targets`, dropping ⊥).

The teachers. BTT18's guarantee is model-agnostic: it holds whatever the teachers are, so an
auditor may choose the teacher learner, and the strongest choice for the attack is one that
memorises: here each teacher is the exact 1-nearest-neighbour classifier of its shard. A
trained network would carry less of one record into its vote.

The canaries. The private data are a binary Gaussian-mixture task in ``task_dim`` coordinates
plus ``num_canaries`` further coordinates, one per canary: canary i is the record
(a·e_i, label 1), included with probability ½ by its coin S_i (add/remove, the pipeline's
neighbouring relation; the coins are fair and independent). Around each canary the auditor
plants helper records that make the vote on the canary's query q_i = a·e_i a tie broken by the
canary: every teacher but the canary's own holds a helper at q_i, half labelled 0 and half 1,
and the canary's teacher holds a label-0 helper at (1 + η)·q_i, which its 1-NN vote falls back
to when the canary is absent. The votes on q_i are then (k ± 1)/2 for label S_i — the worst case
for a vote aggregator, and one a record-keyed partition allows: which shard a record lands in
is a fixed function of its key, so an auditor who chooses the data may place helpers (the
guarantee holds for every key). The queries are ``num_task_queries`` public task points
followed by the canary queries.

The score. From what is published only: the released label of q_i (+1 for label 1, −1 for 0,
0 for ⊥ or after halting), or the student's log-odds of label 1 at q_i. Guess counts are fixed
in advance and combined by Bonferroni (:func:`~pate_stab.audit.one_run.best_one_run_audit`).

What it certifies and what it cannot. A bound above the claimed ε refutes the claim (at the
stated confidence). A bound below it says nothing about tightness: one-run audits are loose,
and with r guesses even a perfect score refutes at most ε ≈ log(1/(β^{-1/r} − 1)) (reported as
``max_certifiable_epsilon``); a claim above that cannot be refuted by this audit at all. The
correct releaser answers a query whose vote can flip (distance 0) only within its share of δ,
so on these canaries it abstains and halts; the audit then measures that behaviour, not the
leakage of the answered task queries (one record cannot move them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from pate_stab._checks import check_generator, check_int, check_positive, check_probability
from pate_stab.aggregation.registry import AggregatorSettings, make_releaser
from pate_stab.aggregation.votes import top_label, vote_histogram
from pate_stab.audit.one_run import OneRunAudit, best_one_run_audit, one_run_epsilon_lower_bound
from pate_stab.data.synthetic import make_gaussian_mixture
from pate_stab.models.networks import ModelSpec
from pate_stab.privacy.noise.seeded import laplace
from pate_stab.rng import spawn_generators
from pate_stab.student import StudentConfig, hard_targets, train_student
from pate_stab.teachers.partition import shard_of_records

__all__ = ["CanaryTask", "make_canary_task", "nearest_neighbour_votes", "release", "audit_transfer", "VARIANTS"]

VARIANTS = ("stability", "stability-secure", "lnmax", "plurality", "lnmax-low-noise")
"""Correct: the stability releaser (seeded or secure noise) and LNMax at their calibrations.
Broken, with the same claims: the plurality vote released without noise (the stability releaser
with its noisy test removed), and LNMax with 1/1000 of its calibrated noise."""

_SCALE = 10.0  # a: canary coordinates sit far from the task data (distance >= a)
_OFFSET = 0.5  # η: the fallback helper of the canary's own teacher


@dataclass
class CanaryTask:
    """The private records, the public queries and the canaries' coins.

    Records: task features ``x`` (n, task_dim) (zero for canary-block records), canary
    coordinate ``canary`` (−1 for task records), its value ``offset`` (a, or (1 + η)·a), label
    ``y`` and integer key ``key``; ``shard`` is each record's teacher.
    """

    x: torch.Tensor
    canary: torch.Tensor
    offset: torch.Tensor
    y: torch.Tensor
    key: torch.Tensor
    shard: torch.Tensor
    num_teachers: int
    query_x: torch.Tensor  # (m, task_dim + num_canaries): dense, as the student sees them
    query_canary: torch.Tensor  # (m,) canary coordinate of each query, −1 for task queries
    query_y: torch.Tensor  # task queries' true labels (−1 for canary queries); for reporting only
    secrets: torch.Tensor  # (num_canaries,) the coins S_i
    partition_seed: int  # the partition's hash key is drawn from a generator with this seed


def _keys_in_shards(needed: torch.Tensor, k: int, start: int, partition_seed: int) -> tuple[torch.Tensor, int]:
    """One fresh key per entry of ``needed`` (shard indices) that the partition maps to that shard."""
    out = torch.empty_like(needed)
    pending = needed.clone()
    where = torch.arange(needed.numel())
    while where.numel():
        pool = torch.arange(start, start + 2 * pending.numel() + 64)
        start += pool.numel()
        shards = shard_of_records(pool, k, generator=torch.Generator().manual_seed(partition_seed))
        order = torch.argsort(shards, stable=True)
        pool_by_shard = torch.split(pool[order], torch.bincount(shards, minlength=k).tolist())
        used = torch.zeros(k, dtype=torch.int64)
        keep = torch.ones(pending.numel(), dtype=torch.bool)
        for idx, j in enumerate(pending.tolist()):
            if used[j] < pool_by_shard[j].numel():
                out[where[idx]] = pool_by_shard[j][used[j]]
                used[j] += 1
                keep[idx] = False
        where, pending = where[keep], pending[keep]
    return out, start


def make_canary_task(
    *,
    num_canaries: int,
    num_teachers: int,
    num_private: int = 4000,
    num_task_queries: int = 200,
    task_dim: int = 5,
    separation: float = 6.0,
    generator: torch.Generator,
) -> CanaryTask:
    """Draw the task, the coins and the keys, and plant the helpers (module docstring)."""
    c = check_int("num_canaries", num_canaries, minimum=2)
    k = check_int("num_teachers", num_teachers, minimum=3)
    if k % 2 == 0:
        raise ValueError(f"num_teachers must be odd so that the helpers tie the vote, got {k}")
    check_generator(generator)
    data_gen, coin_gen, seed_gen = spawn_generators(generator, 3)
    partition_seed = int(torch.randint(0, 2**62, (1,), generator=seed_gen))
    n_task = check_int("num_private", num_private, minimum=1)
    m_task = check_int("num_task_queries", num_task_queries, minimum=0)
    tx, ty = make_gaussian_mixture(
        n_task + m_task, num_classes=2, dim=task_dim, separation=separation, generator=data_gen
    )
    secrets = torch.randint(0, 2, (c,), generator=coin_gen)

    # keys: task records 0..n_task−1, canaries n_task..n_task+c−1, then helpers placed by shard
    canary_keys = torch.arange(n_task, n_task + c)
    all_keys = torch.cat([torch.arange(n_task), canary_keys])
    shard_gen = torch.Generator().manual_seed(partition_seed)
    base_shards = shard_of_records(all_keys, k, generator=shard_gen)
    canary_shard = base_shards[n_task:]
    # helper slots: for canary i, every teacher j (its own teacher gets the fallback helper)
    teachers = torch.arange(k)
    slot_canary = torch.arange(c).repeat_interleave(k)
    slot_shard = teachers.repeat(c)
    own = slot_shard == canary_shard[slot_canary]
    # labels of the others: the first (k−1)/2 teachers after the canary's own (cyclically) vote 0
    rank = (slot_shard - canary_shard[slot_canary]) % k  # 0 for the own teacher, 1..k−1 for the others
    slot_label = torch.where(own | (rank <= (k - 1) // 2), 0, 1)
    slot_offset = torch.where(own, (1 + _OFFSET) * _SCALE, _SCALE)
    helper_keys, _ = _keys_in_shards(slot_shard, k, n_task + c, partition_seed)

    n_helpers = slot_canary.numel()
    include = secrets.bool()
    zeros = torch.zeros
    x = torch.cat([tx[:n_task].double(), zeros((int(include.sum()) + n_helpers, task_dim), dtype=torch.float64)])
    canary = torch.cat([torch.full((n_task,), -1), torch.arange(c)[include], slot_canary])
    offset = torch.cat(
        [
            zeros(n_task, dtype=torch.float64),
            torch.full((int(include.sum()),), _SCALE, dtype=torch.float64),
            slot_offset,
        ]
    )
    y = torch.cat([ty[:n_task], torch.ones(int(include.sum()), dtype=torch.int64), slot_label])
    key = torch.cat([torch.arange(n_task), canary_keys[include], helper_keys])
    shard = shard_of_records(key, k, generator=torch.Generator().manual_seed(partition_seed))  # the partition

    query_x = torch.zeros((m_task + c, task_dim + c), dtype=torch.float32)
    query_x[:m_task, :task_dim] = tx[n_task:]
    query_x[m_task + torch.arange(c), task_dim + torch.arange(c)] = _SCALE
    query_canary = torch.cat([torch.full((m_task,), -1), torch.arange(c)])
    query_y = torch.cat([ty[n_task:], torch.full((c,), -1)])
    return CanaryTask(x, canary, offset, y, key, shard, k, query_x, query_canary, query_y, secrets, partition_seed)


def nearest_neighbour_votes(task: CanaryTask) -> torch.Tensor:
    """Each teacher's exact 1-NN label on every query, (k, m).

    Squared distances are computed exactly from the records' two parts: the task coordinates,
    and the canary coordinates (a value a_r on coordinate c_r for the record, a_q on c_q for the
    query): a_q² + a_r² − 2·a_q·a_r·[c_q = c_r].
    """
    qx = task.query_x[:, : task.x.shape[1]].double()  # the task coordinates of the queries
    q_off = torch.where(task.query_canary >= 0, _SCALE, 0.0).double()
    votes = torch.empty((task.num_teachers, qx.shape[0]), dtype=torch.int64)
    for j in range(task.num_teachers):
        mine = task.shard == j
        rx, rc, ro = task.x[mine], task.canary[mine], task.offset[mine]
        same = (task.query_canary[:, None] == rc[None, :]) & (rc[None, :] >= 0)
        d2 = torch.cdist(qx, rx).pow(2) + q_off[:, None] ** 2 + ro[None, :] ** 2 - 2 * same * q_off[:, None] * ro
        votes[j] = task.y[mine][d2.argmin(dim=1)] if rx.shape[0] else 0
    return votes


def release(
    variant: str, votes: torch.Tensor, *, epsilon: float, delta: float, max_unstable: int, generator: torch.Generator
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Released labels (m,) (−1 for ⊥) of one variant (:data:`VARIANTS`) and its claim."""
    k, m = votes.shape
    counts = vote_histogram(votes, 2)
    name = "lnmax" if variant.startswith("lnmax") else "stability"
    noise = "secure" if variant == "stability-secure" else "seeded"
    settings = AggregatorSettings(
        epsilon=epsilon, delta=delta, num_queries=m, num_teachers=k, max_unstable=max_unstable, noise=noise
    )
    rel = make_releaser(name, settings, generator=generator)
    summary = rel.summary()
    claim: dict[str, Any] = {"epsilon": summary["epsilon"], "delta": summary["delta"]}
    if variant == "plurality":
        return top_label(counts), claim
    if name == "stability":
        return rel.release(counts).labels, {**claim, **summary}
    claim["noise_scale"] = summary["noise_scale"]
    if variant == "lnmax-low-noise":  # LNMax's noisy argmax (PATE 2017, §3.1) with 1/1000 of the noise
        claim["noise_scale_used"] = summary["noise_scale"] / 1000
        noisy = counts.double() + laplace(claim["noise_scale_used"], tuple(counts.shape), generator=generator)
        return noisy.argmax(dim=1), claim
    return rel.release(counts).labels, claim


def _student_scores(task: CanaryTask, labels: torch.Tensor, *, epochs: int, generator: torch.Generator) -> torch.Tensor:
    targets = hard_targets(labels, num_classes=2, bottom="drop")
    spec = ModelSpec("logistic", (task.query_x.shape[1],), 2)
    student = train_student(
        task.query_x,
        targets,
        spec=spec,
        config=StudentConfig(epochs=epochs, lr=0.05),
        generator=generator,
        accelerator="cpu",
    )
    proba = student.predict_proba(task.query_x[task.query_canary >= 0]).double().clamp(1e-12, 1 - 1e-12)
    return torch.log(proba[:, 1]) - torch.log(proba[:, 0])


def audit_transfer(
    variant: str,
    *,
    num_canaries: int,
    num_teachers: int,
    epsilon: float,
    delta: float = 1e-6,
    max_unstable: int = 5,
    num_private: int = 4000,
    num_task_queries: int = 200,
    student_epochs: int | None = 30,
    guesses: list[int] | None = None,
    confidence: float = 0.95,
    generator: torch.Generator,
) -> dict[str, Any]:
    """One pipeline run on the canary task and its audit; ``student_epochs=None`` skips the student.

    Returns a report: the claim, the audit of the released labels and of the student (bound,
    correct guesses, guess count), the largest ε this many guesses could certify, and whether
    the claim is refuted (``violates``).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    check_positive("epsilon", epsilon)
    check_probability("confidence", confidence, open_interval=True)
    task_gen, release_gen, student_gen = spawn_generators(check_generator(generator), 3)
    task = make_canary_task(
        num_canaries=num_canaries,
        num_teachers=num_teachers,
        num_private=num_private,
        num_task_queries=num_task_queries,
        generator=task_gen,
    )
    c = num_canaries
    guesses = guesses or sorted({g - g % 2 for g in (c // 10, c // 2, c) if g >= 2})
    votes = nearest_neighbour_votes(task)
    labels, claim = release(
        variant, votes, epsilon=epsilon, delta=delta, max_unstable=max_unstable, generator=release_gen
    )
    on_canaries = labels[task.query_canary >= 0]
    label_scores = torch.where(on_canaries == 1, 1.0, torch.where(on_canaries == 0, -1.0, 0.0)).double()

    def audit(scores: torch.Tensor) -> dict[str, Any]:
        best, audits = best_one_run_audit(
            scores, task.secrets, guesses=guesses, confidence=confidence, delta=claim["delta"]
        )
        return {**_row(best), "per_guess_count": [_row(a) for a in audits]}

    answered = task.query_canary < 0
    task_labels = labels[answered]
    report: dict[str, Any] = {
        "variant": variant,
        "claimed_epsilon": claim["epsilon"],
        "claimed_delta": claim["delta"],
        "canaries": c,
        "teachers": num_teachers,
        "confidence": confidence,
        "task_queries_answered": int((task_labels >= 0).sum()),
        "task_label_accuracy": _accuracy(task_labels, task.query_y[answered]),
        "canary_queries_answered": int((on_canaries >= 0).sum()),
        "labels": audit(label_scores),
        "max_certifiable_epsilon": one_run_epsilon_lower_bound(
            num_guesses=max(guesses),
            num_correct=max(guesses),
            confidence=1 - (1 - confidence) / len(guesses),
            delta=claim["delta"],
            num_canaries=c,
        ),
        "release": {k_: v for k_, v in claim.items() if isinstance(v, int | float | str | bool)},
    }
    if student_epochs is not None:
        report["student"] = audit(_student_scores(task, labels, epochs=student_epochs, generator=student_gen))
    bounds = [report["labels"]["epsilon_lower_bound"]] + (
        [report["student"]["epsilon_lower_bound"]] if "student" in report else []
    )
    report["violates"] = max(bounds) > claim["epsilon"]
    return report


def _row(a: OneRunAudit) -> dict[str, Any]:
    d = asdict(a)
    return {"epsilon_lower_bound": d["epsilon_lower_bound"], "correct": d["num_correct"], "guesses": d["num_guesses"]}


def _accuracy(labels: torch.Tensor, truth: torch.Tensor) -> float | None:
    answered = labels >= 0
    return float((labels[answered] == truth[answered]).double().mean()) if bool(answered.any()) else None

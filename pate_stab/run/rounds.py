"""A release in rounds: later rounds asked about the pool points an earlier round's student steers to.

With ``rounds = R > 1`` the run's budget (ε, δ) is split into R releases of (ε·s_r, δ·s_r)
(``round_budget_shares`` s, summing to 1; equal shares by default), each one stability releaser
calibrated for ``num_queries`` queries with its own ledger spend id
(:func:`round_spend_id`). The ledger's basic composition (Dwork & Roth 2014, Thm 3.16; the
budget rule of :mod:`pate_stab.privacy.ledger.privacy_ledger`) adds them up to (Σ ε·s_r, Σ δ·s_r) = (ε, δ), and
it holds for adaptively chosen mechanisms, so round r may depend on the outputs of rounds < r.

Round 1 selects its queries by ``query_selection``. Before round r > 1, the run's student is
trained on the released labels of rounds < r and the public pool (:func:`~pate_stab.run.student.fit_student`,
post-processing), and its predictions on the pool order the points not yet queried
(:func:`steered_order`): the predicted classes with the fewest released answers so far take
turns first, so the round goes to the classes the earlier rounds missed, and within a class the
points the student is most confident about come first (the teachers are likelier to agree
there, and the stability releaser pays for every ⊥). The first ``num_queries`` of that order are
offered to round r's releaser in one batch. The order reads only the public pool and released
outputs; the teachers' votes on a point are computed only inside the release call that hands the
point to the releaser (:func:`~pate_stab.run.release.release_labels`).

Replay: each round's outputs and its offered positions are recorded with its spend; a rerun
replays every recorded round (no fresh noise, no new selection) and computes the steering of an
unrecorded round again from the replayed rounds with the same generators.

Teachers of later rounds (``round_features``): ``"same"`` keeps the run's teachers and features in
every round. ``"student"`` rebuilds the propagation teachers of round r > 1 on the representation
of the student fitted on rounds < r (the one that steers round r): its last hidden layer applied
to the run's features of the private and public rows (:func:`student_representation`,
:func:`student_round_teachers`). The map is post-processing of earlier releases and public data,
so it is public; the shards are the run's (each private record still reaches one teacher), and the
graph is rebuilt on the public rows' representation only. Round r's release is a new stability
release on the private data at its own share of the budget, charged like any other round: the
ledger's composition holds for adaptively chosen mechanisms, whatever features they use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from pate_stab._checks import check_int, check_tensor
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.rng import spawn_generators
from pate_stab.run.prepare import Prepared
from pate_stab.run.release import STEERED, Release, release_labels, release_spend_id
from pate_stab.run.student import fit_student, student_inputs, teacher_accuracies
from pate_stab.selection.adaptive_batches import answered_mask
from pate_stab.teachers import PoolVotes, PropagationTeachers

__all__ = [
    "RoundsRelease",
    "release_rounds",
    "round_spend_id",
    "rounds_private_diagnostics",
    "rounds_report",
    "steered_order",
    "student_representation",
    "student_round_teachers",
]

REBUILT = "rebuilt on the student's hidden layer"
"""How the report names the teachers of a round rebuilt by ``round_features: student``."""

_BOOKKEEPING = ("queries_seen", "answered", "abstained", "not_asked", "halted", "replayed_calls", "spend_id")


def round_spend_id(run_name: str, aggregator: str, epsilon: float, round_no: int, rounds: int) -> str:
    """Round ``round_no`` (1-based) of a release in ``rounds`` rounds at total ε:
    ``<run>:<aggregator>:eps=<repr(ε)>:round=<r>/<R>`` (never the id of a one-round release)."""
    rounds = check_int("rounds", rounds, minimum=2)
    round_no = check_int("round_no", round_no, minimum=1)
    if round_no > rounds:
        raise ValueError(f"round_no must be at most rounds ({rounds}), got {round_no}")
    return f"{release_spend_id(run_name, aggregator, epsilon)}:round={round_no}/{rounds}"


def steered_order(proba: Tensor, *, exclude: Tensor, answered_labels: Tensor) -> Tensor:
    """Pool positions not in ``exclude``, ordered for the next round from a student's predictions.

    Each point belongs to its predicted class (the argmax of ``proba``). Classes take turns one
    point at a time, the class with the fewest released answers plus points taken so far first
    (ties: the lower class); within a class, the most confident prediction first (ties: pool
    order). A class with no point left is skipped.

    Args:
        proba: (n, C) the student's class probabilities on the public pool.
        exclude: pool positions already queried (never offered again).
        answered_labels: the classes released so far (answered queries only, int64).

    Returns:
        int64 positions, every pool point outside ``exclude`` exactly once.
    """
    proba = check_tensor("proba", proba, ndim=2, floating=True)
    n, c = proba.shape
    exclude = check_tensor("exclude", exclude, ndim=1, floating=False, nonempty=False).long()
    answered_labels = check_tensor("answered_labels", answered_labels, ndim=1, floating=False, nonempty=False).long()
    if exclude.numel() and not (0 <= int(exclude.min()) and int(exclude.max()) < n):
        raise ValueError(f"exclude must hold pool positions in [0, {n - 1}]")
    if answered_labels.numel() and not (0 <= int(answered_labels.min()) and int(answered_labels.max()) < c):
        raise ValueError(f"answered_labels must hold classes in [0, {c - 1}]")
    confidence, guess = proba.max(1)
    available = torch.ones(n, dtype=torch.bool)
    available[exclude] = False
    queues = []
    for k in range(c):
        rows = torch.nonzero((guess == k) & available).flatten()
        queues.append(rows[confidence[rows].argsort(descending=True, stable=True)].tolist())
    load = torch.bincount(answered_labels, minlength=c).tolist()
    depth = [0] * c
    picks: list[int] = []
    while True:
        open_classes = [k for k in range(c) if depth[k] < len(queues[k])]
        if not open_classes:
            break
        k = min(open_classes, key=lambda j: (load[j], j))
        picks.append(queues[k][depth[k]])
        depth[k] += 1
        load[k] += 1
    return torch.tensor(picks, dtype=torch.int64)


@dataclass
class RoundTeachers:
    """The teachers a later round was released from, when ``round_features="student"`` rebuilt
    them: the teachers and the evaluation rows in their input space (private diagnostics only)."""

    teachers: PropagationTeachers
    eval_x: Tensor
    dim: int


@dataclass
class RoundsRelease:
    """A release in rounds: ``combined`` (all rounds' labels and pool positions, in round order,
    as the student and the report read a release), ``rounds`` (each round's own release) and,
    per round, the teachers rebuilt for it in this call (None: the run's teachers, or replayed)."""

    combined: Release
    rounds: list[Release]
    round_teachers: list[RoundTeachers | None] = field(default_factory=list)


@torch.no_grad()
def student_representation(student: Any, x: Tensor, *, batch_size: int = 4096) -> Tensor:
    """The last hidden layer of a dense student on ``x``: (n, h) float32.

    The student's network must be :func:`~pate_stab.models.networks.build_model`'s dense layout,
    ``Sequential(Flatten, Sequential(Linear, ReLU, …, Linear))`` with at least one hidden layer;
    the output is the activation before the last linear map.
    """
    network = getattr(student, "network", None)
    if not (isinstance(network, nn.Sequential) and len(network) == 2 and isinstance(network[0], nn.Flatten)
            and isinstance(body := network[1], nn.Sequential) and len(body) >= 3
            and isinstance(body[-1], nn.Linear)):  # fmt: skip
        raise ValueError("student_representation needs a dense student with a hidden layer (student_model: mlp)")
    trunk = nn.Sequential(network[0], *list(body)[:-1]).eval()
    device = next(trunk.parameters()).device
    out = [trunk(x[i : i + batch_size].to(device)).float().cpu() for i in range(0, len(x), batch_size)]
    return torch.cat(out) if out else torch.empty(0, body[-1].in_features)


def student_round_teachers(prep: Prepared, student: Any) -> tuple[Prepared, RoundTeachers]:
    """The run's propagation teachers rebuilt on ``student``'s representation (same shards).

    Returns the prepared run whose ``teachers`` and ``votes`` are the rebuilt ones (its task, and
    so the selection's and the student's inputs, unchanged) and the record of those teachers.
    """
    teachers = prep.teachers
    if not isinstance(teachers, PropagationTeachers):
        raise ValueError(f"round_features='student' rebuilds propagation teachers, got {type(teachers).__name__}")
    task = prep.task
    public = student_representation(student, task.public_x)
    private = student_representation(student, task.private_x)
    shards = [torch.nonzero(teachers.shard_of.cpu() == j).flatten() for j in range(teachers.num_teachers)]
    rebuilt = PropagationTeachers(
        public, private, task.private_y, shards, num_classes=task.num_classes, spec=teachers.spec,
        device=teachers.device,
    )  # fmt: skip
    votes = PoolVotes(
        rebuilt, public, task.num_classes, progress=prep.config.execution.progress, device=teachers.device
    )
    record = RoundTeachers(rebuilt, student_representation(student, task.eval_x), int(public.shape[1]))
    return replace(prep, teachers=rebuilt, votes=votes), record


def _combine(releases: list[Release]) -> Release:
    summaries = [r.summary for r in releases]
    first = summaries[0]
    summary: dict[str, Any] = {
        "mechanism": first.get("mechanism"),
        "noise": first.get("noise"),
        "epsilon": math.fsum(float(s["epsilon"]) for s in summaries),
        "delta": math.fsum(float(s["delta"]) for s in summaries),
        "halted": bool(summaries[-1].get("halted", False)),
        "calibration_detail": {"rounds": [{k: v for k, v in s.items() if k not in _BOOKKEEPING} for s in summaries]},
    }
    for key in ("queries_seen", "answered", "abstained", "not_asked"):
        summary[key] = sum(int(s.get(key, 0)) for s in summaries)
    selection = {
        "strategy": f"rounds: {releases[0].selection['strategy']}, then {STEERED}",
        "offered": sum(int(r.selection.get("offered", r.index.numel())) for r in releases),
        "rounds": [{"round": i + 1, **{k: v for k, v in r.selection.items() if k != "index"}}
                   for i, r in enumerate(releases)],
    }  # fmt: skip
    return Release(
        releases[0].aggregator,
        torch.cat([r.labels for r in releases]),
        releases[0].soft,
        summary,
        ";".join(r.spend_id for r in releases),
        all(r.reused for r in releases),
        torch.cat([r.index for r in releases]),
        selection,
    )


def _order(prep: Prepared, earlier: list[Release], student: Any) -> Tensor:
    """:func:`steered_order` of ``student``'s predictions on the pool, past the ``earlier`` rounds."""
    so_far = _combine(earlier)
    proba = student.predict_proba(student_inputs(prep)[0])
    labels = so_far.labels[answered_mask(so_far.labels)]
    return steered_order(proba, exclude=so_far.index, answered_labels=labels)


def _earlier_student(prep: Prepared, earlier: list[Release], generator: torch.Generator,
                     bottom: torch.Generator) -> Any:  # fmt: skip
    """The run's student fitted on the ``earlier`` rounds (post-processing of those releases)."""
    student, _ = fit_student(prep, _combine(earlier), generator=generator, bottom_generator=bottom)
    return student


def _steer(prep: Prepared, earlier: list[Release], generator: torch.Generator, bottom: torch.Generator) -> Tensor:
    """The order of the next round: the run's student fitted on the ``earlier`` rounds, then
    :func:`steered_order` of its predictions on the pool (post-processing of those releases)."""
    return _order(prep, earlier, _earlier_student(prep, earlier, generator, bottom))


def release_rounds(prep: Prepared, ledger: PrivacyLedger) -> RoundsRelease:
    """The run's release in ``config.rounds`` rounds (module docstring), spending through ``ledger``.

    Generators: every round's noise, selection and steering student come from children of
    ``prep.generators["rounds"]``, drawn up front, so a rerun that replays some rounds steers the
    others exactly as the first run did.
    """
    config = prep.config
    if config.release_rounds.rounds < 2:
        raise ValueError(f"release_rounds needs rounds >= 2, got {config.release_rounds.rounds}")
    n = int(prep.task.public_x.shape[0])
    if n <= (config.release_rounds.rounds - 1) * config.release.num_queries:
        raise ValueError(
            f"a public pool of {n} points cannot serve {config.release_rounds.rounds} rounds of "
            f"num_queries={config.release.num_queries}: "
            f"round {config.release_rounds.rounds} could find no point left to ask about (use fewer rounds or "
            "fewer queries)"
        )
    gens = spawn_generators(prep.generators["rounds"], 4 * config.release_rounds.rounds)
    releases: list[Release] = []
    built: list[RoundTeachers | None] = []
    for r, share in enumerate(config.round_shares):
        noise_gen, selection_gen, student_gen, bottom_gen = gens[4 * r : 4 * r + 4]
        spend_id = round_spend_id(
            config.run_name, config.release.aggregator, config.release.epsilon, r + 1, config.release_rounds.rounds
        )
        round_prep, record = prep, None
        steered = partial(_steer, prep, list(releases), student_gen, bottom_gen) if r > 0 else None
        recorded = ledger.entry(spend_id)
        if (
            r > 0
            and config.release_rounds.round_features == "student"
            and not (recorded is not None and recorded.has_result)
        ):
            # one student both steers the round and gives its teachers their inputs
            student = _earlier_student(prep, releases, student_gen, bottom_gen)
            round_prep, record = student_round_teachers(prep, student)
            steered = partial(_order, prep, list(releases), student)
        releases.append(
            release_labels(
                round_prep,
                ledger,
                aggregator=config.release.aggregator,
                epsilon=config.release.epsilon * share,
                delta=config.release.delta * share,
                spend_id=spend_id,
                generator=noise_gen,
                selection_generator=selection_gen,
                steered=steered,
            )
        )
        built.append(record)
    return RoundsRelease(_combine(releases), releases, built)


def rounds_private_diagnostics(result: RoundsRelease, prep: Prepared) -> list[dict[str, Any]]:
    """Mean teacher and plurality accuracy on the evaluation split of each round whose teachers
    were rebuilt in this call (private: the teachers' accuracy is a statistic of the private data)."""
    task = prep.task
    out = []
    for i, record in enumerate(result.round_teachers):
        if record is None:
            continue
        mean, plurality = teacher_accuracies(record.teachers, record.eval_x, task.eval_y, task.num_classes)
        out.append({"round": i + 1, "teacher_features": f"student hidden layer ({record.dim})",
                    "teacher_mean": mean, "plurality": plurality})  # fmt: skip
    return out


def rounds_report(config: Any, result: RoundsRelease, num_classes: int) -> list[dict[str, Any]]:
    """Each round as the report shows it: spend id, share, (ε, δ), selection, queries, classes covered.

    Only released outputs and public settings: the classes are those of the answered labels.
    """
    out = []
    for i, (share, rel) in enumerate(zip(config.round_shares, result.rounds, strict=True)):
        s = rel.summary
        answered = rel.labels[answered_mask(rel.labels)].long()
        per_class = torch.bincount(answered, minlength=num_classes).tolist()
        out.append({
            "round": i + 1,
            "spend_id": rel.spend_id,
            "budget_share": share,
            "epsilon": float(s["epsilon"]),
            "delta": float(s["delta"]),
            "selection": rel.selection["strategy"],
            "teachers": "the run's" if i == 0 or config.release_rounds.round_features == "same" else REBUILT,
            "offered": int(rel.index.numel()),
            "answered": int(s["answered"]),
            "abstained": int(s["abstained"]),
            "not_asked": int(s.get("not_asked", 0)),
            "halted": bool(s.get("halted", False)),
            "answered_per_class": per_class,
            "classes_covered": sum(1 for v in per_class if v),
            "replayed": rel.reused,
        })  # fmt: skip
    return out

"""Bring your own teachers: a votes file in, released labels out, through any registered aggregator.

BTT18's releaser is model-agnostic: it needs only the teachers' votes. :func:`release_votes`
takes them from a file written by any program and releases labels (or ⊥) for every query with
any aggregator of the registry, with the same ledger, replay and report as the main job.

The votes file — its layouts (``predictions``, ``counts``, ``scores``) and formats (``.npy``,
``.pt``, ``.csv``) — is read and checked by :mod:`pate_stab.data.votes_file`, whose names are
re-exported here. Bad input raises :class:`VotesError` naming the problem before the ledger is
opened, so nothing is spent; so do settings the aggregator refuses: the releaser is built (and
so checked) before the ledger is opened, and bound to it only for the release.

The number of classes C is the user's declaration (``num_classes``; a ``counts`` file's width;
2 for ``scores``), never the largest label voted: the output range of every histogram aggregator
is [0, C) (with ⊥), and one teacher voting for a class no other teacher votes for must not change
it (DESIGN.md fact 11). Teacher predictions without ``num_classes`` are refused before anything
is opened, and ``report.json`` states the C released over.

Query order. By default the queries are asked in file order. With ``public_inputs`` — the public
points' inputs or features, one row per query in the votes' order — the main job's query
selection applies (``query_selection="spread"`` by default), through the same
:class:`~pate_stab.selection.spread.SpreadSelector` as the main job's with the main job's default settings
(:data:`~pate_stab.selection.spread.SPREAD_DEFAULTS`): k-means representatives first, then the points whose
neighbourhood on the public points' kNN graph was answered most consistently, away from earlier ⊥. The
graph is built before the output folder is touched (inputs it cannot be built from are refused then).
The selection sees the public inputs and the released outputs only; a query's votes are read inside
the releaser's call, when it is asked. ``labels.npy`` / ``labels.csv`` stay in file order (⊥ or not asked: −1 / empty),
and ``report.json`` lists the order in which the queries were asked.

Unanswerable settings. A stability releaser whose unanimous vote of the file's k teachers would
not pass (:func:`~pate_stab.aggregation.registry.answerability`) would spend the budget on T ⊥
and release nothing: :class:`UnanswerableError` is raised before the ledger is opened, naming
what to change, unless ``allow_unanswerable``.

Privacy. The votes are a function of the private data; the guarantee is the aggregator's, under
the neighbouring relation the caller states (``neighbouring``): one changed record must change
at most one teacher's row (``teachers_changed=2`` covers replace-one over content-keyed shards).
Replay: the spend id is ``<run>:<aggregator>:eps=<repr(ε)>``; a rerun returns the recorded
release, and a rerun with a different votes file is refused, so nothing is spent twice and
nothing is drawn twice. The votes are private, so their identity is HMAC-SHA256 under the output
folder's secret key, kept in ``private_identity.json`` (mode 0600); the published ledger records
the release calls by the queries' positions in the file only.

Budget. The output folder's ledger records a budget cap at its first release: ``budget_epsilon``
/ ``budget_delta`` where given, else the release's own (ε, δ). A later release into the same
folder (another aggregator or ε) must fit what the cap leaves, or is refused before any noise is
drawn; a cap may be lowered, never raised (:func:`pate_stab.run.report.open_ledger`). Every spend is
also counted in the data holder's budget of the votes file as loaded
(:mod:`pate_stab.privacy.ledger.data_budget`): the same votes in another output folder share one budget.
An output folder that shows a release was made (its labels, report or identity) but has lost its
ledger is refused (:func:`pate_stab.run.run_folder.check_ledger_kept`).

Files (DESIGN.md fact 8): ``labels.npy``, ``labels.csv``, ``report.json`` and ``ledger.jsonl``
may be published; ``private_identity.json`` and ``private_key`` may not (the report's ``files``).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, ParamSpec, cast

import numpy as np
import torch

from pate_stab._checks import check_label_relation
from pate_stab.aggregation.base import inputs_digest
from pate_stab.aggregation.registry import (
    AggregatorSettings,
    AggregatorSpec,
    aggregator_spec,
    answerability,
    make_releaser,
)
from pate_stab.data.votes_file import LAYOUTS, Layout, VotesError, export_votes, load_public_inputs, load_votes
from pate_stab.errors import ReplayedSpendError
from pate_stab.privacy.ledger.data_budget import data_set_of
from pate_stab.privacy.ledger.privacy_ledger import PRIVACY_UNITS, PrivacyLedger, anchor_path
from pate_stab.privacy.ledger.private_files import keyed_digest, run_private_key, tensor_bytes
from pate_stab.rng import seeded_generator
from pate_stab.run.config import check_cap
from pate_stab.run.release import release_spend_id
from pate_stab.run.report import PlannedSpend, clean_json, noise_report, open_run_ledger
from pate_stab.run.run_folder import (
    LOCK_NAME,
    PRIVATE_IDENTITY,
    claim_run_folder,
    files_section,
    run_lock,
    write_private_json,
    write_published,
)
from pate_stab.selection.spread import SpreadSelector

__all__ = [
    "LAYOUTS",
    "UnanswerableError",
    "VotesError",
    "export_votes",
    "load_public_inputs",
    "load_votes",
    "release_votes",
]


class UnanswerableError(VotesError):
    """A stability releaser could not answer even a unanimous vote of these teachers; nothing was spent."""


_P = ParamSpec("_P")


def _one_writer(release: Callable[_P, dict[str, Any]]) -> Callable[_P, dict[str, Any]]:
    """Run ``release`` holding the output folder's lock (:func:`~pate_stab.run.run_folder.run_lock`):
    a concurrent release into the same folder is refused before it writes anything."""

    @functools.wraps(release)
    def locked(*args: _P.args, **kwargs: _P.kwargs) -> dict[str, Any]:
        with run_lock(Path(cast("str", kwargs["out_dir"]))):
            return release(*args, **kwargs)

    return locked


@_one_writer
def release_votes(
    votes_path: str | os.PathLike[str],
    *,
    aggregator: str,
    epsilon: float,
    delta: float,
    out_dir: str | os.PathLike[str],
    layout: Layout = "predictions",
    num_classes: int | None = None,
    num_queries: int | None = None,
    max_unstable: int = 10,
    calibration: Literal["paper", "tight"] = "tight",
    noise: str = "secure",
    gamma: float = 0.1,
    confident_threshold: float = 0.6,
    sigma_ratio: float = 2.0,
    neighbouring: str | None = None,
    teachers_changed: int = 1,
    privacy_unit: str = "record",
    seed: int = 0,
    run_name: str | None = None,
    public_inputs: str | os.PathLike[str] | None = None,
    query_selection: str | None = None,
    allow_unanswerable: bool = False,
    progress: bool = False,
    budget_epsilon: float | None = None,
    budget_delta: float | None = None,
) -> dict[str, Any]:
    """Release labels for the queries of a votes file; write labels.npy/.csv, report.json, ledger.jsonl.

    Args:
        votes_path: the votes file (module docstring for layouts and formats).
        aggregator: any registry name (``stability``, ``stability-soft``, ``lnmax``, …).
        epsilon, delta: the target; also the output folder's budget cap at its first release unless
            ``budget_epsilon`` / ``budget_delta`` set it.
        out_dir: where the labels, the report and the ledger go (created).
        num_classes: C, the number of classes, declared: required for ``layout="predictions"``
            (it is never read from the votes); for ``counts`` the file's column count, which it
            must equal if given; for ``scores`` 2.
        num_queries: m the aggregator is calibrated for (default: the file's n; at least n).
        noise: ``"secure"`` (default: exact noise from the OS) or ``"seeded"`` (from ``seed``).
        seed: the noise's seed (seeded mode only): whoever knows it can remove the noise.
        public_inputs: the public points' inputs or features (a file, one row per query in the
            votes' order); queries are then chosen by ``query_selection``.
        query_selection: ``"spread"`` (default with ``public_inputs``) or ``"first"`` (file order;
            the only choice without ``public_inputs``).
        allow_unanswerable: release through a stability releaser even when a unanimous vote of
            the file's k teachers would not pass (it then spends on ⊥ and may release nothing).
        progress: a progress bar over the queries released.
        neighbouring: the relation (None: ``"add_remove"`` for record privacy). Label privacy, whose
            neighbours differ in one record's label, needs ``"replace_one"`` stated: without it the
            release is refused (:func:`pate_stab._checks.check_label_relation`, as every entry point).
        privacy_unit: ``"record"`` (default) or ``"label"`` (label differential privacy: the votes'
            teachers were trained so that one changed label changes at most ``teachers_changed`` rows;
            docs/label_privacy.md). The output folder's ledger holds one unit.
        budget_epsilon, budget_delta: the output folder's budget cap (module docstring, "Budget"):
            recorded at the first release; smaller than the recorded cap: lowers it; larger: refused.
        Others: as :class:`~pate_stab.aggregation.registry.AggregatorSettings`.

    Returns:
        The report (also ``report.json``).

    Raises:
        VotesError: invalid votes, public inputs or options (a budget cap too), or teacher predictions
            without a declared ``num_classes``; nothing was spent and no ledger was opened.
        LabelRelationError: ``privacy_unit="label"`` without ``neighbouring="replace_one"``; nothing was spent.
        UnanswerableError: a stability releaser could not answer at this k; nothing was spent.
        BudgetExhaustedError: the release does not fit the folder's budget cap; nothing was drawn or spent.
        LedgerError: a cap above the recorded one (a cap is never raised), or below what is spent.
        ReplayedSpendError: from the ledger; nothing was released.
        RunFolderLockedError: another release holds the output folder's lock; nothing was written.
    """
    neighbouring = _relation(privacy_unit, neighbouring)
    spec = aggregator_spec(aggregator)
    if spec.votes == "queries":  # its votes are drawn inside the release from the private records themselves
        raise VotesError(
            f"{aggregator} draws its own votes (a query's nearest private records in a fresh sample) and does not "
            "read a votes file; run it with `pate-stab transfer` or `compare` on the private data"
        )
    votes = _read_votes(votes_path, spec, aggregator=aggregator, layout=layout, num_classes=num_classes)
    m = votes.n if num_queries is None else int(num_queries)
    if m < votes.n:
        raise VotesError(f"num_queries={m} is smaller than the {votes.n} queries in the file")
    _check_target(epsilon, delta, budget_epsilon, budget_delta)
    settings = _settings(
        epsilon=float(epsilon), delta=float(delta), num_queries=m, num_teachers=votes.k, max_unstable=max_unstable,
        calibration=calibration, gamma=gamma, confident_fraction=confident_threshold, sigma_ratio=sigma_ratio,
        teachers_changed=teachers_changed, noise=noise,
    )  # fmt: skip
    releaser = _releaser(aggregator, settings, seed=seed, allow_unanswerable=allow_unanswerable)
    selection, selector, pool_x = _query_order(query_selection, public_inputs, votes)
    plan = _Plan(
        votes=votes, spec=spec, aggregator=aggregator, settings=settings, releaser=releaser, selection=selection,
        selector=selector, pool_x=pool_x, neighbouring=neighbouring, privacy_unit=privacy_unit, seed=seed,
        progress=progress, budget=(budget_epsilon, budget_delta),
    )  # fmt: skip
    out = Path(out_dir)
    claim_run_folder(out)  # created, and locked (release_votes holds its run_lock) from here on
    payload, spend_id, reused, ledger_report = _release_or_replay(plan, out, run_name or out.name)
    _write_labels(out, payload["labels"], soft=spec.soft)
    report = _report(plan, payload, out=out, spend_id=spend_id, reused=reused, ledger_report=ledger_report)
    write_published(out / "report.json", json.dumps(report, indent=2, sort_keys=True))
    return report


@dataclass(frozen=True)
class _Votes:
    """A votes file as read and checked (:func:`~pate_stab.data.votes_file.load_votes`)."""

    tensor: torch.Tensor  # (n, C) histograms, or (k, n) scores
    path: str
    layout: Layout  # as read: "scores" for a scores aggregator
    n: int  # queries in the file
    k: int  # teachers
    num_classes: int  # declared (module docstring): a counts file's width, 2 for scores

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        """The votes on the queries at ``index`` (file positions), read when the releaser is asked about them."""
        return self.tensor[:, index] if self.layout == "scores" else self.tensor[index]


@dataclass(frozen=True)
class _Plan:
    """One release, checked before the output folder is touched: what is released, how, in which order."""

    votes: _Votes
    spec: AggregatorSpec
    aggregator: str
    settings: AggregatorSettings  # ε, δ, m, k, T, …; the releaser's
    releaser: Any  # built (and so checked), bound to the ledger only for the release
    selection: str  # "first" or "spread"
    selector: SpreadSelector | None  # "spread": on the public inputs' graph
    pool_x: torch.Tensor | None  # "spread": the public inputs, one row per query
    neighbouring: str
    privacy_unit: str
    seed: int
    progress: bool
    budget: tuple[float | None, float | None]  # the user's cap


def _relation(privacy_unit: str, neighbouring: str | None) -> str:
    """The neighbouring relation of the release (default under record privacy: add/remove), checked against the
    unit (label privacy: replace-one, stated)."""
    if privacy_unit not in PRIVACY_UNITS:
        raise VotesError(f"privacy_unit must be one of {', '.join(PRIVACY_UNITS)}, got {privacy_unit!r}")
    check_label_relation(privacy_unit, neighbouring)  # stated, never inferred: the rule of every entry point
    return "add_remove" if neighbouring is None else neighbouring


def _read_votes(
    votes_path: str | os.PathLike[str],
    spec: AggregatorSpec,
    *,
    aggregator: str,
    layout: Layout,
    num_classes: int | None,
) -> _Votes:
    """The votes file in the layout the aggregator takes (VotesError otherwise)."""
    wanted: Layout = "scores" if spec.votes == "scores" else layout
    if spec.votes == "scores" and layout != "scores":
        raise VotesError(f"{aggregator} releases soft labels from teacher scores: use layout 'scores'")
    if spec.votes == "histogram" and layout == "scores":
        raise VotesError(f"{aggregator} takes vote histograms: use layout 'predictions' or 'counts'")
    votes, n = load_votes(votes_path, layout=wanted, num_classes=num_classes)
    k = int(votes.shape[0]) if wanted == "scores" else int(votes[0].sum())
    declared = 2 if wanted == "scores" else int(votes.shape[1])
    return _Votes(votes, str(votes_path), wanted, n, k, declared)


def _check_target(epsilon: float, delta: float, budget_epsilon: float | None, budget_delta: float | None) -> None:
    """The release's (ε, δ) and the user's cap, as numbers the ledger takes (VotesError otherwise)."""
    for name, value in (("epsilon", epsilon), ("delta", delta)):
        if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise VotesError(f"{name} must be a positive finite number, got {value!r}")
    if delta >= 1:
        raise VotesError(f"delta must lie in (0, 1), got {delta}")
    try:
        check_cap(budget_epsilon, budget_delta)
    except ValueError as exc:
        raise VotesError(str(exc)) from exc


def _settings(**kwargs: Any) -> AggregatorSettings:
    try:
        return AggregatorSettings(**kwargs)
    except (TypeError, ValueError) as exc:
        raise VotesError(str(exc)) from exc


def _releaser(aggregator: str, settings: AggregatorSettings, *, seed: int, allow_unanswerable: bool) -> Any:
    """The aggregator, built (and so checked) before the ledger is opened; it spends only once bound to it.

    Raises:
        VotesError: settings the aggregator refuses.
        UnanswerableError: a stability releaser that could not answer a unanimous vote of these teachers.
    """
    try:
        rel = make_releaser(aggregator, settings, generator=seeded_generator(seed))
        status = answerability(aggregator, settings)
    except (TypeError, ValueError) as exc:
        raise VotesError(str(exc)) from exc
    if status is not None and not status.answerable and not allow_unanswerable:
        eps, s = status.epsilon_needed, settings
        raise UnanswerableError(
            f"{aggregator} cannot answer anything with k={s.num_teachers} teachers at ε={s.epsilon:g}, δ={s.delta:g}, "
            f"T={s.max_unstable}, m={s.num_queries} ({s.calibration} calibration): a unanimous vote needs "
            f"k ≥ {status.teachers_needed}, so the budget would be spent on {s.max_unstable} ⊥. Use more teachers"
            + ("" if eps is None or math.isinf(eps) else f", ε ≥ {eps:.3g}")
            + ", a smaller T or m, or a PATE aggregator, which labels every query (--aggregator gnmax; "
            "`pate-stab plan` shows what each aggregator needs), or --allow-unanswerable. Nothing was spent"
        )
    return rel


def _query_order(
    query_selection: str | None, public_inputs: str | os.PathLike[str] | None, votes: _Votes
) -> tuple[str, SpreadSelector | None, torch.Tensor | None]:
    """How the queries are chosen: ``"first"`` (file order), or ``"spread"`` with its selector on the
    public inputs' graph, built now (before the output folder is touched)."""
    selection = query_selection or ("spread" if public_inputs is not None else "first")
    if selection not in ("first", "spread"):
        raise VotesError(f"query_selection must be 'first' or 'spread', got {selection!r}")
    if selection != "first" and public_inputs is None:
        raise VotesError(f"query_selection={selection!r} needs the public points' inputs (public_inputs)")
    pool_x = load_public_inputs(public_inputs, votes.n) if public_inputs is not None else None
    if selection == "first" or pool_x is None:
        return selection, None, pool_x
    try:
        selector = SpreadSelector.from_inputs(pool_x, num_classes=votes.num_classes)
    except ValueError as exc:
        raise VotesError(f"the public inputs' kNN graph cannot be built: {exc}") from exc
    return selection, selector, pool_x


def _release_or_replay(plan: _Plan, out: Path, run: str) -> tuple[dict[str, Any], str, bool, dict[str, Any]]:
    """Release through the output folder's ledger, or return the release it records (module docstring,
    "Replay"): (payload, spend id, replayed, the ledger's report)."""
    s = plan.settings
    spend_id = release_spend_id(run, plan.aggregator, s.epsilon)
    legacy = f"{run}:{plan.aggregator}:eps={s.epsilon:g}"  # the spend id of older folders

    def spends(ledger: PrivacyLedger | None) -> list[PlannedSpend]:
        old = ledger is not None and ledger.entry(spend_id) is None and ledger.entry(legacy) is not None
        return [PlannedSpend(legacy if old else spend_id, s.epsilon, s.delta)]

    with open_run_ledger(
        out, run_name=run, neighbouring=plan.neighbouring, privacy_unit=plan.privacy_unit, spends=spends,
        data_set=data_set_of([plan.votes.tensor]),  # the data holder's budget of these votes, across folders
        cap_epsilon=plan.budget[0],
        cap_delta=plan.budget[1], how="use a lower ε, or a new output folder (a new ledger: a new use of the data "
        "that you must account for)",
    ) as ledger:  # fmt: skip
        if ledger.entry(spend_id) is None and ledger.entry(legacy) is not None:
            spend_id = legacy
        votes_mac = keyed_digest(run_private_key(out), tensor_bytes(plan.votes.tensor))
        identity_path = out / PRIVATE_IDENTITY
        identity = json.loads(identity_path.read_text()) if identity_path.is_file() else {}
        recorded = ledger.entry(spend_id)
        where = f"spend {spend_id!r} in {out / 'ledger.jsonl'}"
        if recorded is not None and recorded.has_result:
            _check_replay(plan, recorded.result, where, same_votes=identity.get("votes_mac", {}).get(spend_id)
                          == votes_mac)  # fmt: skip
            return recorded.result, spend_id, True, ledger.report()
        known = identity.get("votes_mac", {}).get(spend_id)
        if known is not None and known != votes_mac:
            raise ReplayedSpendError(
                f"{where} was started on other votes; nothing was released now. Use a new output folder (with its "
                "own budget) for these votes"
            )
        identity.setdefault("votes_mac", {})[spend_id] = votes_mac
        write_private_json(identity_path, {k: v for k, v in identity.items() if k != "private"})
        plan.releaser.bind_ledger(ledger, spend_id=spend_id)
        labels, asked = _release_in_order(plan)
        summary = plan.releaser.summary()
        summary["not_asked"] = plan.votes.n - int(summary["queries_seen"])
        payload = {"labels": clean_json(labels.tolist()), "summary": clean_json(summary), "selection": asked}
        ledger.record_result(spend_id, payload)
        return payload, spend_id, False, ledger.report()


def _check_replay(plan: _Plan, payload: dict[str, Any], where: str, *, same_votes: bool) -> None:
    """A recorded release is returned only for the same votes, noise mode and selection (ReplayedSpendError)."""
    # older folders kept an unkeyed digest of the votes in the ledger
    if not (same_votes or ("votes_digest" in payload and payload["votes_digest"] == inputs_digest(plan.votes.tensor))):
        raise ReplayedSpendError(
            f"{where} released other votes; the recorded labels belong to them. Use a new output folder (with its own "
            "budget) for these votes"
        )
    noise = plan.settings.noise
    recorded_noise = payload.get("summary", {}).get("noise", "seeded")
    if recorded_noise != noise:
        raise ReplayedSpendError(
            f"{where} was released with noise={recorded_noise!r}, not {noise!r}; its labels carry that mode's "
            f"guarantee. Ask for noise={recorded_noise!r} to read them again, or use a new output folder (with its "
            "own budget)"
        )
    asked = payload.get("selection", {"strategy": "first"})
    if asked["strategy"] != plan.selection:
        raise ReplayedSpendError(
            f"{where} was released with query selection {asked['strategy']!r}, not {plan.selection!r}; use a new "
            "output folder for another selection"
        )


def _release_in_order(plan: _Plan) -> tuple[torch.Tensor, dict[str, Any]]:
    """Release the file's queries in file order or by the spread selection; labels come back in file order.

    The selection gets only ``release`` (pool positions → released outputs); the votes are indexed
    inside it, when the releaser is asked about those positions.
    """
    from tqdm import tqdm

    rel, n, spec = plan.releaser, plan.votes.n, plan.spec
    bar = tqdm(total=n, desc=f"release {rel.mechanism}", unit="query", disable=not plan.progress)
    with bar:
        if plan.selector is None or plan.pool_x is None:
            # the queries' positions in the file identify the call in the (published) ledger
            labels = rel.release(plan.votes.tensor, query_ids=torch.arange(n)).labels
            bar.update(n)
            return labels, {"strategy": "first"}

        def release(index: torch.Tensor) -> torch.Tensor:
            out = rel.release(plan.votes.rows(index), query_ids=index).labels
            bar.update(int(index.numel()))
            return out

        selected = plan.selector.select(
            plan.pool_x, num_queries=n, release=release, halted=lambda: rel.halted,
            max_unstable=plan.settings.max_unstable if spec.halts else None, generator=seeded_generator(plan.seed),
        )  # fmt: skip
    fill = math.nan if spec.soft else -1
    labels = torch.full((n,), fill, dtype=torch.float64 if spec.soft else torch.int64)
    labels[selected.index] = selected.labels.to(labels.dtype)
    return labels, {"strategy": "spread", "order": selected.index.tolist(), "rounds": selected.rounds}


def _write_labels(out: Path, labels: list[Any], *, soft: bool) -> None:
    """``labels.npy`` and ``labels.csv``, in file order (⊥ or not asked: −1 / NaN, an empty cell)."""
    array = np.array([np.nan if v is None else v for v in labels], dtype=np.float64 if soft else np.int64)
    npy = io.BytesIO()
    np.save(npy, array)
    write_published(out / "labels.npy", npy.getvalue())
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    writer.writerow(["query", "label"])
    for i, v in enumerate(labels):
        writer.writerow([i, "" if v is None or v == -1 else v])
    write_published(out / "labels.csv", table.getvalue())


def _report(
    plan: _Plan, payload: dict[str, Any], *, out: Path, spend_id: str, reused: bool, ledger_report: dict[str, Any]
) -> dict[str, Any]:
    """``report.json``: the release's certified (ε, δ), counts, relation, noise, selection, files."""
    s, votes = payload["summary"], plan.votes
    return clean_json(
        {
            "votes": {
                "path": votes.path,
                "layout": votes.layout,
                "num_teachers": votes.k,
                "num_queries_in_file": votes.n,
                "num_classes": votes.num_classes,  # declared (module docstring)
            },  # fmt: skip
            "aggregator": plan.aggregator,
            "accounting": plan.spec.accounting,
            "epsilon": s["epsilon"],
            "delta": s["delta"],
            "calibrated_for_queries": plan.settings.num_queries,
            "queries": {
                "seen": int(s["queries_seen"]),
                "answered": int(s["answered"]),
                "abstained": int(s["queries_seen"]) - int(s["answered"]),
                "not_asked": int(s.get("not_asked", 0)),
                "halted": bool(s.get("halted", False)),
            },
            "privacy": {
                "neighbouring": plan.neighbouring,
                "privacy_unit": plan.privacy_unit,
                "teachers_changed_per_neighbour": plan.settings.teachers_changed,
            },  # fmt: skip
            "noise": noise_report(s),
            "summary": s,
            "query_selection": payload.get("selection", {"strategy": "first"}),
            "reused": reused,
            "outputs": {"labels_npy": str(out / "labels.npy"), "labels_csv": str(out / "labels.csv")},
            "ledger": {**ledger_report, "spend_id": spend_id},
            "files": files_section(
                ["labels.npy", "labels.csv", "report.json", "ledger.jsonl", LOCK_NAME],
                [PRIVATE_IDENTITY, "private_key", anchor_path(out / "ledger.jsonl").name],
            ),
        }
    )

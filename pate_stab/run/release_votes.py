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
selection applies (:func:`~pate_stab.run.selection.release_in_rounds`, ``query_selection="spread"``
by default): k-means representatives first, then the points whose neighbourhood on the public
points' kNN graph was answered most consistently, away from earlier ⊥. The selection sees the
public inputs and the released outputs only; a query's votes are read inside the releaser's call,
when it is asked. ``labels.npy`` / ``labels.csv`` stay in file order (⊥ or not asked: −1 / empty),
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
drawn; a cap may be lowered, never raised (:func:`pate_stab.run.report.open_ledger`).

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
from pathlib import Path
from typing import Any, Literal, ParamSpec, cast

import numpy as np
import torch

from pate_stab.aggregation.base import inputs_digest
from pate_stab.aggregation.registry import AggregatorSettings, aggregator_spec, answerability, make_releaser
from pate_stab.data.votes_file import LAYOUTS, Layout, VotesError, export_votes, load_public_inputs, load_votes
from pate_stab.errors import ReplayedSpendError
from pate_stab.privacy.ledger.privacy_ledger import PRIVACY_UNITS, PrivacyLedger, anchor_path
from pate_stab.privacy.ledger.private_files import keyed_digest, run_private_key, tensor_bytes
from pate_stab.rng import seeded_generator
from pate_stab.run.config import check_cap
from pate_stab.run.private import PRIVATE_IDENTITY, files_section, write_private_json
from pate_stab.run.release import release_spend_id
from pate_stab.run.report import PlannedSpend, clean_json, noise_report, open_run_ledger
from pate_stab.run.run_folder import LOCK_NAME, claim_run_folder, run_lock, write_published

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
        neighbouring: the relation (None: ``"add_remove"`` for record privacy, ``"replace_one"`` for
            label privacy, whose neighbours differ in one record's label).
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
        UnanswerableError: a stability releaser could not answer at this k; nothing was spent.
        BudgetExhaustedError: the release does not fit the folder's budget cap; nothing was drawn or spent.
        LedgerError: a cap above the recorded one (a cap is never raised), or below what is spent.
        ReplayedSpendError: from the ledger; nothing was released.
        RunFolderLockedError: another release holds the output folder's lock; nothing was written.
    """
    if privacy_unit not in PRIVACY_UNITS:
        raise VotesError(f"privacy_unit must be one of {', '.join(PRIVACY_UNITS)}, got {privacy_unit!r}")
    if neighbouring is None:
        neighbouring = "replace_one" if privacy_unit == "label" else "add_remove"
    if privacy_unit == "label" and neighbouring != "replace_one":
        raise VotesError(
            f"label privacy's neighbours differ in one record's label (a replacement): neighbouring must be "
            f"'replace_one' under privacy_unit='label', got {neighbouring!r}"
        )
    spec = aggregator_spec(aggregator)
    wanted: Layout = "scores" if spec.votes == "scores" else layout
    if spec.votes == "scores" and layout != "scores":
        raise VotesError(f"{aggregator} releases soft labels from teacher scores: use layout 'scores'")
    if spec.votes == "histogram" and layout == "scores":
        raise VotesError(f"{aggregator} takes vote histograms: use layout 'predictions' or 'counts'")
    votes, n = load_votes(votes_path, layout=wanted, num_classes=num_classes)
    k = int(votes.shape[0]) if wanted == "scores" else int(votes[0].sum())
    m = n if num_queries is None else int(num_queries)
    if m < n:
        raise VotesError(f"num_queries={m} is smaller than the {n} queries in the file")
    for name, value in (("epsilon", epsilon), ("delta", delta)):
        if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise VotesError(f"{name} must be a positive finite number, got {value!r}")
    if delta >= 1:
        raise VotesError(f"delta must lie in (0, 1), got {delta}")
    try:
        check_cap(budget_epsilon, budget_delta)
    except ValueError as exc:
        raise VotesError(str(exc)) from exc
    try:
        settings = AggregatorSettings(
            epsilon=float(epsilon), delta=float(delta), num_queries=m, num_teachers=k, max_unstable=max_unstable,
            calibration=calibration, gamma=gamma, confident_fraction=confident_threshold, sigma_ratio=sigma_ratio,
            teachers_changed=teachers_changed, noise=noise,
        )  # fmt: skip
        # built (and so checked) before the ledger is opened; it spends only once bound to the ledger below
        rel = make_releaser(aggregator, settings, generator=seeded_generator(seed))
        status = answerability(aggregator, settings)
    except (TypeError, ValueError) as exc:
        raise VotesError(str(exc)) from exc
    if status is not None and not status.answerable and not allow_unanswerable:
        eps = status.epsilon_needed
        raise UnanswerableError(
            f"{aggregator} cannot answer anything with k={k} teachers at ε={epsilon:g}, δ={delta:g}, T={max_unstable}, "
            f"m={m} ({calibration} calibration): a unanimous vote needs k ≥ {status.teachers_needed}, so the budget "
            f"would be spent on {max_unstable} ⊥. Use more teachers"
            + ("" if eps is None or math.isinf(eps) else f", ε ≥ {eps:.3g}")
            + ", a smaller T or m, or a PATE aggregator, which labels every query (--aggregator gnmax; "
            "`pate-stab plan` shows what each aggregator needs), or --allow-unanswerable. Nothing was spent"
        )
    selection = query_selection or ("spread" if public_inputs is not None else "first")
    if selection not in ("first", "spread"):
        raise VotesError(f"query_selection must be 'first' or 'spread', got {selection!r}")
    if selection != "first" and public_inputs is None:
        raise VotesError(f"query_selection={selection!r} needs the public points' inputs (public_inputs)")
    pool_x = load_public_inputs(public_inputs, n) if public_inputs is not None else None
    out = Path(out_dir)
    claim_run_folder(out)  # created, and locked (release_votes holds its run_lock) from here on
    run = run_name or out.name
    spend_id = release_spend_id(run, aggregator, float(epsilon))
    legacy = f"{run}:{aggregator}:eps={float(epsilon):g}"  # the spend id of older folders

    def spends(ledger: PrivacyLedger | None) -> list[PlannedSpend]:
        old = ledger is not None and ledger.entry(spend_id) is None and ledger.entry(legacy) is not None
        return [PlannedSpend(legacy if old else spend_id, float(epsilon), float(delta))]

    with open_run_ledger(
        out, run_name=run, neighbouring=neighbouring, privacy_unit=privacy_unit, spends=spends,
        cap_epsilon=budget_epsilon,
        cap_delta=budget_delta, how="use a lower ε, or a new output folder (a new ledger: a new use of the data "
        "that you must account for)",
    ) as ledger:  # fmt: skip
        if ledger.entry(spend_id) is None and ledger.entry(legacy) is not None:
            spend_id = legacy
        votes_mac = keyed_digest(run_private_key(out), tensor_bytes(votes))
        identity_path = out / PRIVATE_IDENTITY
        identity = json.loads(identity_path.read_text()) if identity_path.is_file() else {}
        recorded = ledger.entry(spend_id)
        if recorded is not None and recorded.has_result:
            payload = recorded.result
            # older folders kept an unkeyed digest of the votes in the ledger
            same = identity.get("votes_mac", {}).get(spend_id) == votes_mac or (
                "votes_digest" in payload and payload["votes_digest"] == inputs_digest(votes)
            )
            if not same:
                raise ReplayedSpendError(
                    f"spend {spend_id!r} in {out / 'ledger.jsonl'} released other votes; the recorded labels "
                    "belong to them. Use a new output folder (with its own budget) for these votes"
                )
            recorded_noise = payload.get("summary", {}).get("noise", "seeded")
            if recorded_noise != noise:
                raise ReplayedSpendError(
                    f"spend {spend_id!r} in {out / 'ledger.jsonl'} was released with noise={recorded_noise!r}, not "
                    f"{noise!r}; its labels carry that mode's guarantee. Ask for noise={recorded_noise!r} to read "
                    "them again, or use a new output folder (with its own budget)"
                )
            asked = payload.get("selection", {"strategy": "first"})
            if asked["strategy"] != selection:
                raise ReplayedSpendError(
                    f"spend {spend_id!r} in {out / 'ledger.jsonl'} was released with query selection "
                    f"{asked['strategy']!r}, not {selection!r}; use a new output folder for another selection"
                )
            reused = True
        else:
            known = identity.get("votes_mac", {}).get(spend_id)
            if known is not None and known != votes_mac:
                raise ReplayedSpendError(
                    f"spend {spend_id!r} in {out / 'ledger.jsonl'} was started on other votes; nothing was released "
                    "now. Use a new output folder (with its own budget) for these votes"
                )
            identity.setdefault("votes_mac", {})[spend_id] = votes_mac
            write_private_json(identity_path, {k: v for k, v in identity.items() if k != "private"})
            rel.bind_ledger(ledger, spend_id=spend_id)
            labels, asked = _release_in_order(rel, votes, spec, selection, pool_x, n, max_unstable, seed, progress)
            summary = rel.summary()
            summary["not_asked"] = n - int(summary["queries_seen"])
            payload = {"labels": clean_json(labels.tolist()), "summary": clean_json(summary), "selection": asked}
            ledger.record_result(spend_id, payload)
            reused = False
        ledger_report = ledger.report()
    labels_list = payload["labels"]
    soft = spec.soft
    array = np.array([np.nan if v is None else v for v in labels_list], dtype=np.float64 if soft else np.int64)
    npy = io.BytesIO()
    np.save(npy, array)
    write_published(out / "labels.npy", npy.getvalue())
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    writer.writerow(["query", "label"])
    for i, v in enumerate(labels_list):
        writer.writerow([i, "" if v is None or v == -1 else v])
    write_published(out / "labels.csv", table.getvalue())
    s = payload["summary"]
    report = clean_json(
        {
            "votes": {
                "path": str(votes_path),
                "layout": wanted,
                "num_teachers": k,
                "num_queries_in_file": n,
                "num_classes": 2 if wanted == "scores" else int(votes.shape[1]),  # declared (module docstring)
            },  # fmt: skip
            "aggregator": aggregator,
            "accounting": spec.accounting,
            "epsilon": s["epsilon"],
            "delta": s["delta"],
            "calibrated_for_queries": m,
            "queries": {
                "seen": int(s["queries_seen"]),
                "answered": int(s["answered"]),
                "abstained": int(s["queries_seen"]) - int(s["answered"]),
                "not_asked": int(s.get("not_asked", 0)),
                "halted": bool(s.get("halted", False)),
            },
            "privacy": {
                "neighbouring": neighbouring,
                "privacy_unit": privacy_unit,
                "teachers_changed_per_neighbour": teachers_changed,
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
    write_published(out / "report.json", json.dumps(report, indent=2, sort_keys=True))
    return report


def _release_in_order(
    rel: Any,
    votes: torch.Tensor,
    spec: Any,
    selection: str,
    pool_x: torch.Tensor | None,
    n: int,
    max_unstable: int,
    seed: int,
    progress: bool,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Release the file's queries in file order or by the spread selection; labels come back in file order.

    The selection gets only ``release`` (pool positions → released outputs); the votes are indexed
    inside it, when the releaser is asked about those positions.
    """
    from tqdm import tqdm

    def rows(index: torch.Tensor) -> torch.Tensor:
        return votes[:, index] if spec.votes == "scores" else votes[index]

    bar = tqdm(total=n, desc=f"release {rel.mechanism}", unit="query", disable=not progress)
    with bar:
        if selection == "first" or pool_x is None:
            # the queries' positions in the file identify the call in the (published) ledger
            labels = rel.release(votes, query_ids=torch.arange(n)).labels
            bar.update(n)
            return labels, {"strategy": "first"}
        from pate_stab.features.propagation import PoolGraph
        from pate_stab.run.config import TransferConfig
        from pate_stab.run.selection import release_in_rounds
        from pate_stab.student.spreading import spread_labels

        defaults = TransferConfig()  # the main job's graph and selection settings
        num_classes = 2 if spec.votes == "scores" else int(votes.shape[1])
        graph = PoolGraph(
            num_neighbors=defaults.graph_neighbors, power=defaults.graph_power, alpha=defaults.graph_alpha,
            steps=defaults.graph_steps, pca_dim=defaults.graph_pca_dim,
        ).fit(pool_x)  # fmt: skip
        if graph.adjacency is None:
            raise VotesError("the public inputs' kNN graph could not be built")
        adjacency = graph.adjacency

        def spread(index: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            answered = ~torch.isnan(labels) if labels.is_floating_point() else labels != -1
            hard = (labels >= 0.5).long() if labels.is_floating_point() else labels.long()
            classes = torch.where(answered, hard, torch.full_like(hard, num_classes))  # ⊥ → class C
            return spread_labels(adjacency, index, classes, num_classes=num_classes + 1, alpha=defaults.graph_alpha,
                                 steps=defaults.graph_steps)  # fmt: skip

        def release(index: torch.Tensor) -> torch.Tensor:
            out = rel.release(rows(index), query_ids=index).labels
            bar.update(int(index.numel()))
            return out

        selected = release_in_rounds(
            pool_x, num_queries=n, strategy="spread", release=release, halted=lambda: rel.halted, spread=spread,
            coverage=defaults.selection_coverage, round_size=min(defaults.selection_round_size, n),
            max_unstable=max_unstable if spec.halts else None, generator=seeded_generator(seed),
        )  # fmt: skip
    fill = math.nan if spec.soft else -1
    labels = torch.full((n,), fill, dtype=torch.float64 if spec.soft else torch.int64)
    labels[selected.index] = selected.labels.to(labels.dtype)
    return labels, {"strategy": "spread", "order": selected.index.tolist(), "rounds": selected.rounds}

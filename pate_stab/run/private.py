"""What a run may publish and what stays private: the split of its outputs, and its data identity.

DESIGN.md fact 8. A run folder holds

* **published** files: mechanism outputs and what is computed from them and from public data —
  ``config.json`` (the settings), ``ledger.jsonl`` (budget, relation, spends, released labels;
  written without wall-clock times, calls recorded by public query positions), ``student.pt``,
  ``report.json`` (the certified (ε, δ) and relation, release counts, PATE's *sanitised*
  data-dependent ε, the student's accuracy on the evaluation split, label accuracy computed from
  the released labels and the public pool's true labels), and for ``compare`` its
  ``compare.json`` / ``compare.txt`` / ``compare.png``;
* **private** files (mode 0600, named ``private*``), never needed to use the published ones:
  ``private_diagnostics.json`` (teacher and plurality accuracy, the exact private size, the raw
  data-dependent ε with its RDP and smooth-sensitivity inputs, wall times of the stages —
  teacher training time depends on the private size), ``private_key`` (the folder's secret key)
  and ``private_identity.json`` (the MAC of the data the run was made with); likewise
  ``private_compare.json`` for ``compare``;
* **private folders** (:data:`PRIVATE_FOLDERS`, mode 0700, every file in them 0600): ``teachers/``
  (the teachers' weights, ``config.json`` and Lightning's checkpoints: models of the private data
  that no mechanism paid for) and ``features/`` (the private records' features). A run made before
  they were private has its folders tightened when it is reopened.

``features.pt`` (a PCA fitted on the public pool only) may be published, and so may ``direct/``
(:data:`PUBLISHED_FOLDERS`): the direct learners' models, each a mechanism output charged in the
ledger, and nothing else.

:func:`split_private` moves the private fields out of a report; :func:`check_data_identity`
makes a rerun refuse data other than the run's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import Tensor

from pate_stab.privacy.ledger.private_files import keyed_digest, run_private_key, tensor_bytes, write_private
from pate_stab.run.run_folder import LEDGER_MARK

__all__ = [
    "PRIVATE_DIAGNOSTICS",
    "PRIVATE_FOLDERS",
    "PRIVATE_IDENTITY",
    "PUBLISHED_FOLDERS",
    "check_data_identity",
    "files_section",
    "split_private",
    "write_private_json",
]

PRIVATE_DIAGNOSTICS = "private_diagnostics.json"
PRIVATE_IDENTITY = "private_identity.json"
PRIVATE_FOLDERS = ("teachers", "features")
"""Folders of working state derived from private data without a mechanism: 0700, files 0600."""
PUBLISHED_FOLDERS = ("direct",)
"""Folders of mechanism outputs: the direct learners' models (one charged spend each)."""

_PRIVATE_NOTE = (
    "computed from private data without a charged mechanism: NOT differentially private. Keep it "
    "with the private data; never publish it. The published files never need it."
)


def write_private_json(path: Path, data: Any) -> Path:
    """Write JSON to a private file (mode 0600), with a note that says it is private."""
    return write_private(path, json.dumps({"private": _PRIVATE_NOTE, **data}, indent=2, sort_keys=True))


def files_section(published: list[str], private: list[str]) -> dict[str, Any]:
    """The report's ``files`` section: which file of the run folder may be published, which not."""
    return {
        "published": sorted(published),
        "private": sorted(private),
        "note": "published: mechanism outputs and what is computed from them and public data; private (files "
        "0600, folders 0700): statistics of the private data no mechanism paid for, secret keys and working "
        "state derived from private data (teachers/: the teachers' weights and checkpoints; features/: the "
        "private records' features)",
    }


def split_private(report: dict[str, Any], paths: list[tuple[str, ...]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move the fields at ``paths`` (key tuples) out of ``report``: (published, private) copies.

    A path whose field is absent is skipped; emptied sections are dropped from the published copy.
    """
    public = json.loads(json.dumps(report))
    private: dict[str, Any] = {}
    for path in paths:
        src: Any = public
        for key in path[:-1]:
            src = src.get(key) if isinstance(src, dict) else None
        if not isinstance(src, dict) or path[-1] not in src:
            continue
        dst = private
        for key in path[:-1]:
            dst = dst.setdefault(key, {})
        dst[path[-1]] = src.pop(path[-1])
    for path in paths:  # drop sections the move emptied
        if len(path) > 1 and isinstance(public.get(path[0]), dict) and not public[path[0]]:
            public.pop(path[0])
    return public, private


LOADED_IDENTITY = "splits as loaded"
"""``private_identity.json``'s ``identity``: the MAC covers the splits before any preprocessing."""


def check_data_identity(run_dir: Path, tensors: list[Tensor], *, legacy: list[Tensor] | None = None) -> None:
    """Record the run's data on first use; refuse other data on a rerun.

    The identity is HMAC-SHA256 of the tensors (the splits as loaded, :attr:`pate_stab.run.data.Task.loaded`)
    under the folder's secret key (:func:`~pate_stab.privacy.ledger.private_files.run_private_key`), kept in
    ``private_identity.json`` (0600): a digest of private data is itself private, so it never goes into
    ``config.json`` or the report. A folder whose identity was recorded from the preprocessed splits
    (``legacy``; before the identity read the data as loaded) is checked against those and then given the
    new identity.

    Raises:
        ValueError: the folder was made with other data (a rerun would reuse teachers and
            releases that belong to it).
    """
    key = run_private_key(run_dir)
    mac = keyed_digest(key, *(tensor_bytes(t) for t in tensors))
    path = run_dir / PRIVATE_IDENTITY
    record = json.loads(path.read_text()) if path.is_file() else {}
    if set(record) - {"private", LEDGER_MARK}:  # recorded before (a file with the ledger's mark alone records none)
        if record.get("identity") == LOADED_IDENTITY:
            same = record.get("data_mac") == mac
        else:  # recorded from the preprocessed splits
            same = legacy is not None and record.get("data_mac") == keyed_digest(
                key, *(tensor_bytes(t) for t in legacy)
            )
        if not same:
            raise ValueError(
                f"{run_dir} was made with other data than this run reads (the data files or the split changed "
                "since its teachers were trained and its labels released); its teachers and releases belong to "
                "that data. Choose another run name or remove the folder"
            )
        if record.get("identity") == LOADED_IDENTITY:
            return
    # other fields (the mark of the folder's ledger, pate_stab.run.run_folder.check_ledger_kept) are kept
    kept = {k: v for k, v in record.items() if k not in ("private", "data_mac", "identity", "mac")}
    mine = {"data_mac": mac, "identity": LOADED_IDENTITY, "mac": "HMAC-SHA256 under private_key of the run's splits"}
    write_private_json(path, kept | mine)

"""The public size N of a run's private set, from which every DP-SGD parameter is computed.

DP-SGD's guarantee here is stated under add/remove one record, where the number n of private
records is itself private: q, the steps, σ and the gradient divisor must be the same on a data
set and on it with one record more or less (:mod:`pate_stab.direct.dpsgd`, "public size"), and n
must not appear in a published file (DESIGN.md fact 8). They are computed from N:

* ``private_size_hint`` when the run sets it (a public figure chosen by the user, never computed
  from the private data);
* else the size documented for a bundled data set's private split, a published file:
  :data:`DOCUMENTED_PRIVATE_SIZES` (the loaders keep every row of it: PATE's split takes the
  whole training set as private, Adult's private split is ``adult.data``); the synthetic task's
  ``num_private`` (a setting, published with the run's configuration);
* with ``threat_model="label-only"`` the private part is the records whose labels are kept, an
  expected share 1 − ``label_only_share`` of that size (the split is a keyed hash): N is that
  expectation, rounded (public settings only);
* own data (``dataset`` "files" / "arrays") without a hint: refused before anything is spent.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DOCUMENTED_PRIVATE_SIZES", "dpsgd_public_size", "public_size_source"]


DOCUMENTED_PRIVATE_SIZES = {
    "mnist": 60000,  # LeCun et al.: 60,000 training images
    "fashion_mnist": 60000,  # Xiao, Rasul & Vollgraf 2017: 60,000 training images
    "svhn": 73257,  # Netzer et al. 2011: 73,257 digits in train_32x32.mat
    "cifar10": 50000,  # Krizhevsky 2009: 50,000 training images
    "adult": 32561,  # UCI Adult, adult.names: 32,561 rows in adult.data
}
"""The documented size of each bundled data set's private split (its published training file)."""


def dpsgd_public_size(config: Any) -> int:
    """N for the run's DP-SGD learners (module docstring); reads public settings only, never the data.

    ``config``: the run's settings (a :class:`~pate_stab.run.config.TransferConfig`): ``private_size_hint``,
    ``dataset``, ``num_private``, ``threat_model`` and ``label_only_share``.

    Raises:
        ValueError: own data without ``private_size_hint`` (the message says how to choose one).
    """
    if config.direct.private_size_hint is not None:
        return int(config.direct.private_size_hint)
    if config.data.dataset == "synthetic":
        size = int(config.data.num_private)
    elif config.data.dataset in DOCUMENTED_PRIVATE_SIZES:
        size = DOCUMENTED_PRIVATE_SIZES[config.data.dataset]
    else:
        raise ValueError(
            f"DP-SGD (add/remove one record) needs a public size of the private set: dataset {config.data.dataset!r} "
            "has no documented one, so set private_size_hint (--set private_size_hint=N). Do not compute it from "
            "the private data (under add/remove their exact count is private): give a rounded figure you would "
            "publish anyway; the sampling rate, steps and noise are computed from it"
        )
    if config.data.threat_model == "label-only":
        return max(1, round(size * (1.0 - config.data.label_only_share)))
    return size


def public_size_source(config: Any) -> str:
    """Where :func:`dpsgd_public_size` took N from, for the spend's metadata (public settings only)."""
    if config.direct.private_size_hint is not None:
        return "private_size_hint (the run's setting)"
    base = "num_private (the synthetic task's setting)" if config.data.dataset == "synthetic" else (
        f"documented size of {config.data.dataset}'s published training file")  # fmt: skip
    if config.data.threat_model == "label-only":
        return f"{base} × (1 − label_only_share), rounded"
    return base

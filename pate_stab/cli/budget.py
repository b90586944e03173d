"""``pate-stab budget``: what each private data set has spent, in which folders, and its cap.

    pate-stab budget                                   # every data set of the data holder's budget folder
    pate-stab budget --set 8 --data-set 3f2a9c01b7e4   # set that data set's cap (ε; δ kept)
    pate-stab budget --set 8,1e-5 --data-set 3f2a9c01b7e4
    pate-stab budget --set 8,1e-5                      # the cap of every data set not recorded yet

The data holder's budget (:mod:`pate_stab.privacy.ledger.data_budget`, ``docs/privacy.md``) counts every
spend on a private data set, across run folders. A new data set's cap is the data holder's cap for new
data sets (``--set`` without ``--data-set``) where set, else its first run's (that run's folder cap:
``--budget-epsilon`` / ``--budget-delta`` set it); afterwards only ``--set … --data-set ID`` changes it.
``--budget-dir`` (or ``PATE_STAB_BUDGET_DIR``) names the folder; the default is ``~/.pate_stab/budget``.
What this command prints (the data sets, their spends and folders) is the data holder's, not for
publication.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from pate_stab.vocabulary import NEIGHBOURING_RELATIONS, PRIVACY_UNITS

__all__ = ["add_budget_dir_flag", "add_budget_parser", "cmd_budget", "use_budget_dir"]


def add_budget_dir_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget-dir", type=Path, default=None, metavar="DIR",
                        help="the data holder's budget folder, where every spend on a private data set is counted "
                        "across run folders (default: $PATE_STAB_BUDGET_DIR, else ~/.pate_stab/budget)")  # fmt: skip


def use_budget_dir(args: argparse.Namespace) -> None:
    """``--budget-dir``, where given, for this process (and what it starts): the environment variable."""
    from pate_stab.privacy.ledger.data_budget import BUDGET_DIR_ENV

    if getattr(args, "budget_dir", None) is not None:
        os.environ[BUDGET_DIR_ENV] = str(Path(args.budget_dir).expanduser().resolve())


def add_budget_parser(sub: Any) -> argparse.ArgumentParser:
    budget = sub.add_parser("budget", help="what each private data set has spent, in which folders; set its cap",
                            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    budget.add_argument("--set", dest="set_cap", default=None, metavar="EPS[,DELTA]",
                        help="set the data set's cap (with --data-set: up or down, never below what is spent), "
                        "or, without it, the cap of every data set not recorded yet")  # fmt: skip
    budget.add_argument("--neighbouring", default=None, choices=NEIGHBOURING_RELATIONS,
                        help="with --set and no --data-set: the relation new data sets count under (default: their "
                        "first run's); replace_one counts add/remove runs too, by group privacy")  # fmt: skip
    budget.add_argument("--privacy-unit", default=None, choices=PRIVACY_UNITS,
                        help="with --set and no --data-set: the unit new data sets count under (label: with "
                        "--neighbouring replace_one; counts record runs too)")  # fmt: skip
    budget.add_argument("--data-set", default=None, metavar="ID",
                        help="a data set's id as listed (a prefix is enough)")  # fmt: skip
    add_budget_dir_flag(budget)
    return budget


def _cap(text: str) -> tuple[float, float | None]:
    parts = text.split(",")
    if len(parts) > 2:
        raise ValueError(f"--set takes EPS or EPS,DELTA, got {text!r}")
    try:
        eps = float(parts[0])
        delta = float(parts[1]) if len(parts) == 2 else None
    except ValueError:
        raise ValueError(f"--set takes EPS or EPS,DELTA (numbers), got {text!r}") from None
    if not (math.isfinite(eps) and eps > 0) or (delta is not None and not 0 <= delta < 1):
        raise ValueError(f"--set: ε must be a positive finite number and δ in [0, 1), got {text!r}")
    return eps, delta


def cmd_budget(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pate_stab.errors import PateStabError
    from pate_stab.privacy.ledger.data_budget import (
        DataSetBudget,
        budget_dir,
        data_sets,
        default_cap,
        default_relation,
        set_default_cap,
    )

    use_budget_dir(args)
    root = budget_dir()
    known = data_sets()
    try:
        if args.set_cap is not None and args.data_set is None:  # the cap of every data set not recorded yet
            eps, delta = _cap(args.set_cap)
            old = default_cap()
            set_default_cap(eps, (old[1] if old else 1e-5) if delta is None else delta, neighbouring=args.neighbouring,
                            privacy_unit=args.privacy_unit)  # fmt: skip
            known = []
        elif args.neighbouring is not None or args.privacy_unit is not None:
            parser.error("--neighbouring and --privacy-unit set how new data sets count: use them with --set and no "
                         "--data-set (a recorded data set keeps its relation)")  # fmt: skip
        elif args.set_cap is not None:
            eps, delta = _cap(args.set_cap)
            chosen = [d for d in known if d.data_id.startswith(args.data_set.lower())]
            if len(chosen) != 1:
                what = "no data set" if not chosen else f"{len(chosen)} data sets"
                parser.error(f"{what} in {root} has an id starting with {args.data_set!r} (`pate-stab budget` lists "
                             "them)")  # fmt: skip
            with DataSetBudget.open(chosen[0], create=False) as budget:
                budget.set_cap(eps, budget.ledger.budget[1] if delta is None else delta)
            known = chosen
        elif args.data_set is not None:
            known = [d for d in known if d.data_id.startswith(args.data_set.lower())]
        print(f"data holder's budget: {root} (private: never publish what follows)")
        new_cap = default_cap()
        rel, unit = default_relation()
        shown = "its first run's (that folder's cap)" if new_cap is None else (
            f"(ε={new_cap[0]:.6g}, δ={new_cap[1]:.3g}), set by the data holder")  # fmt: skip
        if rel or unit:
            shown += f"; counted under {rel or 'its first run'}'s relation, {unit or 'its first run'}'s unit"
        print(f"  a new data set's cap: {shown}")
        if not known and args.set_cap is None:
            print("  no data set has spent from it yet")
        for ds in known:
            with DataSetBudget.open(ds, create=False) as budget:
                led = budget.ledger
                spent, cap = led.spent(), led.budget
                print(f"data set {ds.short_id}: spent (ε={spent[0]:.6g}, δ={spent[1]:.3g}) of the cap (ε={cap[0]:.6g}, "
                      f"δ={cap[1]:.3g}); {led.privacy_unit} privacy, {led.neighbouring.replace('_', '/')}")  # fmt: skip
                folders: dict[str, list[float]] = {}
                for entry in led.entries():
                    row = folders.setdefault(str(entry.metadata.get("folder")), [0.0, 0.0, 0])
                    row[0] += entry.epsilon
                    row[1] += entry.delta
                    row[2] += 1
                for folder, (e, d, n) in sorted(folders.items()):
                    gone = "" if Path(folder).is_dir() else " (folder deleted: its spends still count)"
                    print(f"  {folder}: ε={e:.6g}, δ={d:.3g} in {int(n)} spend(s){gone}")
    except (ValueError, PateStabError, PermissionError) as exc:
        parser.error(str(exc))
    return 0

"""Helpers shared by the direct learners' run tests: ledger lines without the model digest, and
the command line's refusals on own data files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from torch import Tensor

from pate_stab.cli.commands import main


def spend_lines(run_dir) -> list[dict]:
    """The ledger's spend and result lines; left out of the result: the model's digest, which differs with the model,
    and the integrity chain's hash over that line (it covers the digest)."""
    out = []
    for rec in map(json.loads, (run_dir / "ledger.jsonl").read_text().splitlines()):
        if rec.get("kind") == "result":
            rec["payload"].pop("sha256")
            rec.pop("sha256")
        if rec.get("kind") in ("spend", "result"):
            out.append(rec)
    return out


def cli_refusals(
    tmp_path, private: tuple[Tensor, Tensor], public: Tensor, learner: str, capsys, extra: tuple[str, ...] = ()
) -> dict[str, str]:
    """Write own .npz files of 3 classes and run ``learner`` on them by ``transfer`` (run ``t``) and
    ``compare`` (run ``c``), with the flags ``extra``; each must exit with 2. Returns each run's standard error."""
    np.savez(tmp_path / "p.npz", x=private[0].numpy(), y=private[1].numpy())
    np.savez(tmp_path / "q.npz", x=public.numpy())
    errors = {}
    for name, argv in (("t", ["transfer", "--aggregator", learner]),
                       ("c", ["compare", "--aggregators", "--direct", learner])):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main([*argv, "--private", str(tmp_path / "p.npz"), "--public", str(tmp_path / "q.npz"), "--classes", "3",
                  "--num-queries", "20", "--run-name", name, "--checkpoints-dir", str(tmp_path), *extra])  # fmt: skip
        assert exc.value.code == 2
        errors[name] = capsys.readouterr().err
    return errors

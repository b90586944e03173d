"""A releaser built before its ledger is opened spends through it once bound, exactly as one built with it.

``release_votes`` builds its releaser to check the settings before anything is written, and binds
the ledger for the release (``bind_ledger``). Binding after a call would leave released outputs
out of the ledger, so it is refused.
"""

from __future__ import annotations

import pytest
import torch

from pate_stab.aggregation.registry import AggregatorSettings, make_releaser
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger

SETTINGS = dict(epsilon=4.0, delta=1e-5, num_queries=40, num_teachers=50, max_unstable=10, noise="seeded")


def _counts(m=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    top = torch.randint(20, 51, (m,), generator=gen)
    return torch.stack([top, 50 - top], dim=1)


def _ledger(path):
    return PrivacyLedger(path, run_id="t", budget_epsilon=100.0, budget_delta=1e-3, timestamps=False)


@pytest.mark.parametrize("name", ["stability", "gnmax", "lnmax"])
def test_bound_releaser_records_what_a_releaser_built_with_the_ledger_records(tmp_path, name):
    settings = AggregatorSettings(**SETTINGS)
    counts = _counts()
    with _ledger(tmp_path / "a.jsonl") as a:
        built = make_releaser(name, settings, generator=torch.Generator().manual_seed(3), ledger=a, spend_id="s")
        labels_a = built.release(counts, query_ids=torch.arange(40)).labels
    bound = make_releaser(name, settings, generator=torch.Generator().manual_seed(3))
    with _ledger(tmp_path / "b.jsonl") as b:
        bound.bind_ledger(b, spend_id="s")
        labels_b = bound.release(counts, query_ids=torch.arange(40)).labels
    assert torch.equal(labels_a, labels_b)
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    assert bound.summary()["spend_id"] == "s"


def test_binding_after_a_call_or_twice_is_refused(tmp_path):
    settings = AggregatorSettings(**SETTINGS)
    used = make_releaser("stability", settings, generator=torch.Generator().manual_seed(0))
    used.release(_counts(5))
    with _ledger(tmp_path / "l.jsonl") as ledger:
        with pytest.raises(RuntimeError, match="before the first call"):
            used.bind_ledger(ledger, spend_id="s")
        fresh = make_releaser("gnmax", settings, generator=torch.Generator().manual_seed(0))
        fresh.bind_ledger(ledger, spend_id="s")
        with pytest.raises(RuntimeError, match="already"):
            fresh.bind_ledger(ledger, spend_id="s2")
        with pytest.raises(TypeError, match="PrivacyLedger"):
            make_releaser("lnmax", settings, generator=torch.Generator().manual_seed(0)).bind_ledger(
                "ledger.jsonl", spend_id="s"
            )

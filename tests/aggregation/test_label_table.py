import math

import pytest
import torch

from pate_stab.aggregation import TABLE_AGGREGATORS, compare_aggregators, format_table
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger


def _votes(k=900, m=200, c=4, p=0.95, seed=0):
    g = torch.Generator().manual_seed(seed)
    truth = torch.randint(0, c, (m,), generator=g)
    agree = torch.rand(k, m, generator=g) < p
    preds = torch.where(agree, truth.expand(k, m), torch.randint(0, c, (k, m), generator=g))
    return preds, truth


def test_every_aggregator_same_target(tmp_path):
    preds, truth = _votes()
    ledger = PrivacyLedger(tmp_path / "ledger.jsonl", run_id="t", budget_epsilon=100.0, budget_delta=1e-3)
    rows = compare_aggregators(
        preds,
        truth,
        num_classes=4,
        epsilon=8.0,
        delta=1e-5,
        max_unstable=5,
        generator=torch.Generator().manual_seed(1),
        ledger=ledger,
    )
    assert [r.mechanism for r in rows] == list(TABLE_AGGREGATORS)
    for r in rows:
        assert r.epsilon <= 8.0 * (1 + 1e-6) and r.delta <= 1e-5 * (1 + 1e-9)
        assert 0 <= r.answered <= r.queries_seen <= 200
        assert r.label_accuracy_overall <= (1.0 if math.isnan(r.label_accuracy_answered) else r.label_accuracy_answered)
    tight = rows[1]
    assert tight.answered == 200 and tight.label_accuracy_answered == 1.0  # 900 near-unanimous teachers
    eps, _ = ledger.spent()
    assert eps == pytest.approx(sum(r.epsilon for r in rows), rel=1e-9)  # every run recorded
    assert "stability-tight" in format_table(rows)


def test_bad_input():
    preds, truth = _votes(m=10)
    with pytest.raises(ValueError, match="queries"):
        compare_aggregators(
            preds, truth[:5], num_classes=4, epsilon=1, delta=1e-5, max_unstable=1, generator=torch.Generator()
        )
    with pytest.raises(ValueError, match="unknown"):
        compare_aggregators(
            preds,
            truth,
            num_classes=4,
            epsilon=1,
            delta=1e-5,
            max_unstable=1,
            generator=torch.Generator(),
            aggregators=["x"],
        )
    with pytest.raises(ValueError, match="epsilon"):
        compare_aggregators(
            preds, truth, num_classes=4, epsilon=0, delta=1e-5, max_unstable=1, generator=torch.Generator()
        )

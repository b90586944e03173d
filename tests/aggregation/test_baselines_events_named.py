"""PATE's aggregators document the events they record in the project's vocabulary
(:mod:`pate_stab.privacy.accounting.events`), not dp-accounting's ``*DpEvent`` classes: each event a
docstring names exists there, and each aggregator's docstring names the events its queries record."""

from __future__ import annotations

import re

import pytest

import pate_stab.aggregation.baselines as baselines
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.privacy.accounting import events

NAMED = re.compile(r"\b([A-Z][A-Za-z]*Event)\b")


def _docstrings() -> list[str]:
    out = [baselines.__doc__ or "", baselines.gaussian_event.__doc__ or ""]
    for cls in (LNMax, GNMax, ConfidentGNMax):
        out += [cls.__doc__ or ""] + [
            getattr(cls, name).__doc__ or "" for name in vars(cls) if not name.startswith("__")
        ]
    return out


def test_docstrings_name_the_projects_events_only():
    named = {name for doc in _docstrings() for name in NAMED.findall(doc)}
    assert named, "the docstrings name no event"
    assert not [n for n in named if n.endswith("DpEvent")], "dp-accounting's events named instead of the project's"
    assert not [n for n in named if not hasattr(events, n)], "an event the project does not define"


def _events(event) -> set[str]:
    names = {type(event).__name__}
    for inner in getattr(event, "events", ()) or ():
        names |= _events(inner)
    return names


@pytest.mark.parametrize("noise", ["seeded", "secure"])
@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [(LNMax, {}), (GNMax, {}), (ConfidentGNMax, {"threshold": 60.0})],
)
def test_each_aggregator_names_the_events_its_queries_record(cls, kwargs, noise):
    agg = cls.calibrate(epsilon=2.0, delta=1e-5, num_queries=10, noise=noise, **kwargs)
    secure = getattr(cls, "secure_event", None)
    text = " ".join([cls.__doc__ or "", baselines.__doc__ or "", (secure.__doc__ or "") if secure else ""])
    recorded = _events(agg.per_query_event())
    assert recorded <= set(NAMED.findall(text)), (cls.__name__, noise, recorded)

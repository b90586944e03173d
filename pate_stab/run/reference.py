"""The majority-class reference: what always predicting one class scores on the evaluation split.

A private learner that does not beat a constant predictor has learnt nothing usable, whatever its ε.
Every ``compare`` table carries this reference as a row of its own, and every row, a transfer's
report and the "best mean accuracy per ε" line say in plain words when a learner is at or below it.

Which class. The evaluation split's own most common class, scored on that split. Choosing the
class on the labels it is scored on makes the reference optimistic, but by little: it can beat the
class a predictor fixed in advance would choose only when two classes are nearly tied, and then by
at most the gap between their rates (which is then small). The alternatives are worse: the public
pool's labels are often absent (own data); the released labels differ per row; the private labels
are private. A reference a learner must clear should err high, not low.

Privacy. The evaluation labels are public — the rows' ``student_acc`` is published from the same
labels — and the reference reads nothing else: no spend, no private statistic. It is not a learner
and is never ranked as one (:func:`flag_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["AT_OR_BELOW", "REFERENCE_NAME", "at_or_below", "flag_rows", "majority_reference", "reference_note",
           "reference_words"]  # fmt: skip

REFERENCE_NAME = "majority-class"
"""The reference's name in a table (its ``aggregator`` cell)."""
AT_OR_BELOW = "at_or_below_majority"
"""The key of a row's flag: its student accuracy is at or below the majority-class reference."""
_TOLERANCE = 1e-12


def majority_reference(eval_y: Any, class_names: Sequence[str] | None, num_classes: int) -> dict[str, Any] | None:
    """The reference on the evaluation labels ``eval_y`` (class indices): ``{"name", "class",
    "class_index", "accuracy", "evaluated_on", "note"}``; None without evaluation labels.

    Ties go to the lowest class index (a fixed rule, not a choice made on the scores).
    """
    labels = [int(v) for v in (eval_y.tolist() if hasattr(eval_y, "tolist") else eval_y)]
    if not labels:
        return None
    counts = [labels.count(c) for c in range(num_classes)]
    index = max(range(num_classes), key=lambda c: (counts[c], -c))
    name = str(class_names[index]) if class_names is not None else str(index)
    accuracy = counts[index] / len(labels)
    return {
        "name": REFERENCE_NAME,
        "class": name,
        "class_index": index,
        "accuracy": accuracy,
        "evaluated_on": "evaluation split (its most common class, scored on it)",
        "note": reference_note(name, accuracy),
    }


def reference_note(name: str, accuracy: float) -> str:
    """The reference row's note, one plain sentence."""
    return (
        f"Always predicting {name!r}, the evaluation split's most common class, scores {accuracy:.4f}: a reference, "
        "not a learner, with no privacy cost; a row at or below it has learnt nothing usable "
        "(docs/plan.md: The majority-class reference)."
    )


def at_or_below(accuracy: float | None, reference: dict[str, Any] | None) -> bool:
    """Whether ``accuracy`` is at or below the reference's (False where either is missing)."""
    if accuracy is None or reference is None:
        return False
    return float(accuracy) <= float(reference["accuracy"]) + _TOLERANCE


def reference_words(reference: dict[str, Any]) -> str:
    """'always predicting 'yes' (0.6781)'."""
    return f"always predicting {reference['class']!r} ({reference['accuracy']:.4f})"


def flag_rows(rows: Sequence[dict[str, Any]], reference: dict[str, Any] | None) -> None:
    """Set every row's :data:`AT_OR_BELOW` flag and add a plain sentence to the note of a flagged row."""
    for r in rows:
        flagged = at_or_below(r.get("student_acc"), reference)
        r[AT_OR_BELOW] = flagged
        if flagged and reference is not None:
            words = f"No better than {reference_words(reference)}: this model has learnt nothing usable."
            r["note"] = f"{words} {r['note']}" if r.get("note") else words

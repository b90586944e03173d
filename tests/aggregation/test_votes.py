"""Tests for pate_stab.aggregation.votes: histograms, bins, and the distance to instability."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.aggregation.votes import (
    bin_midpoints,
    distance_to_instability,
    gamma_histogram,
    num_bins,
    paper_distance_to_instability,
    shifted_bin_values,
    shifted_gamma_histogram,
    top_label,
    vote_gap,
    vote_histogram,
)

# --------------------------------------------------------------------------- vote histograms


def reference_histogram(predictions: torch.Tensor, num_classes: int) -> torch.Tensor:
    k, m = predictions.shape
    out = torch.zeros(m, num_classes, dtype=torch.int64)
    for j in range(k):
        for t in range(m):
            out[t, int(predictions[j, t])] += 1
    return out


def test_vote_histogram_small_example() -> None:
    predictions = torch.tensor([[0, 1, 2], [0, 2, 2], [1, 2, 2], [0, 0, 2]])  # k=4 teachers, m=3
    counts = vote_histogram(predictions, 3)
    assert counts.dtype == torch.int64
    assert counts.tolist() == [[3, 1, 0], [1, 1, 2], [0, 0, 4]]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int16])
def test_vote_histogram_matches_reference(dtype: torch.dtype, generator: torch.Generator) -> None:
    predictions = torch.randint(0, 5, (13, 40), generator=generator).to(dtype)
    counts = vote_histogram(predictions, 5)
    assert torch.equal(counts, reference_histogram(predictions, 5))
    assert torch.equal(counts.sum(1), torch.full((40,), 13))


def test_vote_histogram_unused_classes_are_zero() -> None:
    counts = vote_histogram(torch.zeros(5, 2, dtype=torch.int64), 4)
    assert counts.tolist() == [[5, 0, 0, 0], [5, 0, 0, 0]]


@pytest.mark.parametrize(
    "predictions, exc, match",
    [
        (torch.tensor([[0.0, 1.0]]), TypeError, "integer dtype"),
        (torch.tensor([[True, False]]), TypeError, "integer dtype"),
        (torch.tensor([0, 1]), ValueError, "2 dimensions"),
        (torch.zeros(2, 2, 2, dtype=torch.int64), ValueError, "2 dimensions"),
        (torch.zeros(0, 3, dtype=torch.int64), ValueError, "empty"),
        (torch.tensor([[0, 3]]), ValueError, r"\[0, 3\)"),
        (torch.tensor([[0, -1]]), ValueError, r"\[0, 3\)"),
    ],
)
def test_vote_histogram_rejects_bad_predictions(predictions: torch.Tensor, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        vote_histogram(predictions, 3)


@pytest.mark.parametrize("num_classes, exc", [(0, ValueError), (2.0, TypeError), (True, TypeError)])
def test_vote_histogram_rejects_bad_num_classes(num_classes: object, exc: type) -> None:
    with pytest.raises(exc, match="num_classes"):
        vote_histogram(torch.zeros(2, 2, dtype=torch.int64), num_classes)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- γ-histograms


def test_num_bins_requires_integer_inverse() -> None:
    assert num_bins(0.5) == 2
    assert num_bins(0.1) == 10
    assert num_bins(1 / 7) == 7
    for bad in (0.3, 0.15, 0.4):
        with pytest.raises(ValueError, match="1/gamma must be an integer"):
            num_bins(bad)
    for bad in (0.0, -0.1, 0.75, 1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="gamma"):
            num_bins(bad)


def test_gamma_histogram_bin_edges() -> None:
    # γ = 1/4: bins [0, .25), [.25, .5), [.5, .75), [.75, 1]; edges are exact in binary.
    scores = torch.tensor([[0.0, 0.2499, 0.25, 0.5, 0.74, 0.75, 0.999, 1.0]], dtype=torch.float64).T  # (8, 1)
    counts = gamma_histogram(scores, 0.25)
    assert counts.shape == (1, 4)
    assert counts.tolist() == [[2, 1, 2, 3]]


def test_gamma_histogram_decimal_gamma() -> None:
    # γ = 0.1: 0.3 belongs to [0.3, 0.4) (column 3), 0.29 to column 2, 1.0 to the last bin.
    scores = torch.tensor([[0.3], [0.29], [1.0], [0.05]], dtype=torch.float64)
    counts = gamma_histogram(scores, 0.1)
    assert counts[0].tolist() == [1, 0, 1, 1, 0, 0, 0, 0, 0, 1]


def test_shifted_histogram_bins_and_dropped_half_bins() -> None:
    # γ = 1/4: shifted bins [1/8, 3/8), [3/8, 5/8), [5/8, 7/8); [0, 1/8) and [7/8, 1] count for no bin.
    scores = torch.tensor(
        [[0.0], [0.1249], [0.125], [0.3], [0.375], [0.5], [0.625], [0.8749], [0.875], [1.0]], dtype=torch.float64
    )
    counts = shifted_gamma_histogram(scores, 0.25)
    assert counts.shape == (1, 3)
    assert counts.tolist() == [[2, 2, 2]]  # 4 of the 10 scores fall in the dropped half-bins


def test_shifted_histogram_single_bin_at_half() -> None:
    scores = torch.tensor([[0.2], [0.25], [0.6], [0.75], [0.9]], dtype=torch.float64)
    assert shifted_gamma_histogram(scores, 0.5).tolist() == [[2]]


def test_histograms_match_interval_definition(generator: torch.Generator) -> None:
    """Every score lands in the bin whose interval contains it (reference: explicit intervals)."""
    for n in (2, 3, 5, 10):
        scores = torch.rand(31, 7, generator=generator, dtype=torch.float64)
        plain, shifted = gamma_histogram(scores, 1 / n), shifted_gamma_histogram(scores, 1 / n)
        ref_plain = torch.zeros(7, n, dtype=torch.int64)
        ref_shifted = torch.zeros(7, n - 1, dtype=torch.int64)
        for s, t in itertools.product(range(31), range(7)):
            x = float(scores[s, t])
            ref_plain[t, [v for v in range(n) if v / n <= x < (v + 1) / n or (v == n - 1 and x == 1.0)]] += 1
            for v in range(1, n):
                if (v - 0.5) / n <= x < (v + 0.5) / n:
                    ref_shifted[t, v - 1] += 1
        assert torch.equal(plain, ref_plain)
        assert torch.equal(shifted, ref_shifted)
        assert torch.equal(plain.sum(1), torch.full((7,), 31))


def test_midpoints_and_shifted_values() -> None:
    assert torch.allclose(bin_midpoints(0.25), torch.tensor([0.125, 0.375, 0.625, 0.875], dtype=torch.float64))
    assert torch.allclose(shifted_bin_values(0.25), torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    gamma = 0.1
    v = torch.arange(1, 11, dtype=torch.float64)
    assert torch.allclose(bin_midpoints(gamma), (2 * v - 1) * gamma / 2)
    assert torch.allclose(shifted_bin_values(gamma), torch.arange(1, 10, dtype=torch.float64) * gamma)
    # each released value lies inside its own bin
    scores = torch.cat([bin_midpoints(gamma), shifted_bin_values(gamma)]).unsqueeze(1)  # (19, 1)
    assert torch.equal(gamma_histogram(scores[:10], gamma), torch.ones(10, dtype=torch.int64).unsqueeze(1).T)
    assert torch.equal(shifted_gamma_histogram(scores[10:], gamma), torch.ones(1, 9, dtype=torch.int64))


@pytest.mark.parametrize("fn", [gamma_histogram, shifted_gamma_histogram])
def test_histograms_reject_bad_scores(fn) -> None:  # type: ignore[no-untyped-def]
    good = torch.full((3, 2), 0.5, dtype=torch.float64)
    with pytest.raises(ValueError, match="NaN"):
        fn(torch.tensor([[0.5, float("nan")]]), 0.25)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fn(torch.tensor([[0.5, 1.5]]), 0.25)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fn(torch.tensor([[-0.1, 0.5]]), 0.25)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fn(torch.tensor([[float("inf"), 0.5]]), 0.25)
    with pytest.raises(TypeError, match="floating"):
        fn(torch.tensor([[0, 1]]), 0.25)
    with pytest.raises(ValueError, match="2 dimensions"):
        fn(torch.tensor([0.5, 0.5]), 0.25)
    with pytest.raises(ValueError, match="1/gamma must be an integer"):
        fn(good, 0.3)


def test_one_changed_score_moves_at_most_one_count(generator: torch.Generator) -> None:
    """One teacher's new score: the γ-histogram moves one vote; the shifted one changes ℓ1 ≤ 2."""
    scores = torch.rand(9, 200, generator=generator, dtype=torch.float64)
    changed = scores.clone()
    changed[4] = torch.rand(200, generator=generator, dtype=torch.float64)
    for n in (2, 4, 10):
        d_plain = gamma_histogram(changed, 1 / n) - gamma_histogram(scores, 1 / n)
        d_shift = shifted_gamma_histogram(changed, 1 / n) - shifted_gamma_histogram(scores, 1 / n)
        assert int(d_plain.abs().sum(1).max()) <= 2 and int(d_plain.sum(1).abs().max()) == 0
        assert int(d_shift.abs().sum(1).max()) <= 2 and int(d_shift.abs().max()) <= 1


# --------------------------------------------------------------------------- distance to instability


def test_distance_examples() -> None:
    counts = torch.tensor([[7, 3, 0], [5, 5, 0], [6, 5, 0], [7, 5, 0], [8, 5, 0], [9, 0, 0], [0, 0, 0]])
    assert vote_gap(counts).tolist() == [4, 0, 1, 2, 3, 9, 0]
    assert distance_to_instability(counts).tolist() == [1, 0, 0, 0, 1, 4, 0]
    assert paper_distance_to_instability(counts).tolist() == [3, 0, 0, 1, 2, 8, 0]
    assert distance_to_instability(counts).dtype == torch.int64


def test_top_label_ties_go_to_lowest_index() -> None:
    counts = torch.tensor([[3, 3, 1], [1, 4, 4], [2, 2, 2], [0, 0, 5], [0, 0, 0]])
    assert top_label(counts).tolist() == [0, 1, 0, 2, 0]


def test_single_class_histogram() -> None:
    counts = torch.tensor([[0], [1], [2], [5]])
    assert vote_gap(counts).tolist() == [0, 1, 2, 5]
    assert distance_to_instability(counts).tolist() == [0, 0, 0, 2]
    assert top_label(counts).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("fn", [distance_to_instability, paper_distance_to_instability, top_label, vote_gap])
def test_distance_rejects_bad_counts(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="integer"):
        fn(torch.tensor([[1.0, 2.0]]))
    with pytest.raises(ValueError, match="2 dimensions"):
        fn(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="non-negative"):
        fn(torch.tensor([[1, -2]]))
    with pytest.raises(ValueError, match="empty"):
        fn(torch.zeros(1, 0, dtype=torch.int64))


def single_moves(counts: list[int]) -> list[list[int]]:
    """Every histogram reachable by moving one vote from class a to class b ≠ a."""
    out = []
    for a, b in itertools.permutations(range(len(counts)), 2):
        if counts[a] > 0:
            moved = list(counts)
            moved[a] -= 1
            moved[b] += 1
            out.append(moved)
    return out


def check_move_properties(counts: list[int]) -> tuple[int, int, bool]:
    """Assert the sensitivity-1 facts for every single move.

    Returns the largest change of each distance and whether some move changed the top label.
    """
    base = torch.tensor([counts])
    moves = single_moves(counts)
    if not moves:
        return 0, 0, False
    moved = torch.tensor(moves)
    d0, d1 = int(distance_to_instability(base)[0]), distance_to_instability(moved)
    assert int((d1 - d0).abs().max()) <= 1, (counts, moves)
    label_changes = bool((top_label(moved) != int(top_label(base)[0])).any())
    if label_changes:
        assert d0 == 0, counts
    p0, p1 = int(paper_distance_to_instability(base)[0]), paper_distance_to_instability(moved)
    return int((d1 - d0).abs().max()), int((p1 - p0).abs().max()), label_changes


def compositions(k: int, c: int):  # type: ignore[no-untyped-def]
    """All histograms of k votes over c classes."""
    for cuts in itertools.combinations_with_replacement(range(k + 1), c - 1):
        bounds = (0, *cuts, k)
        yield [bounds[i + 1] - bounds[i] for i in range(c)]


def test_sensitivity_exhaustive_small() -> None:
    """All histograms with k ≤ 12 votes over C ≤ 4 classes, every single-vote move."""
    largest_change = largest_paper_change = label_changing = 0
    for c in (2, 3, 4):
        for k in range(0, 13):
            for counts in compositions(k, c):
                change, paper_change, label_changes = check_move_properties(counts)
                largest_change = max(largest_change, change)
                largest_paper_change = max(largest_paper_change, paper_change)
                label_changing += label_changes
    assert largest_change == 1
    assert largest_paper_change == 2  # the paper's gap − 1 has sensitivity 2 (DESIGN.md fact 2)
    assert label_changing > 100  # the dist == 0 condition was exercised


def test_paper_distance_changes_by_two() -> None:
    before, after = torch.tensor([[4, 0]]), torch.tensor([[3, 1]])
    assert int(paper_distance_to_instability(before)[0] - paper_distance_to_instability(after)[0]) == 2
    assert int(distance_to_instability(before)[0] - distance_to_instability(after)[0]) == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=60), min_size=2, max_size=8))
def test_sensitivity_random_histograms(counts: list[int]) -> None:
    check_move_properties(counts)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=6), st.data())
def test_one_sided_changes_have_sensitivity_one(counts: list[int], data: st.DataObject) -> None:
    """½-shifted histograms: a score entering or leaving a dropped half-bin changes one count by 1."""
    i = data.draw(st.integers(min_value=0, max_value=len(counts) - 1))
    up = list(counts)
    up[i] += 1
    both = torch.tensor([counts, up])
    d = distance_to_instability(both)
    assert abs(int(d[1] - d[0])) <= 1
    if int(top_label(both)[0]) != int(top_label(both)[1]):
        assert int(d[0]) == 0


def test_distance_counts_votes_that_can_move() -> None:
    """dist = d: no d moves change the top label; some d + 1 moves change it or tie it (C ≤ 3, k ≤ 9).

    (A tie kept by the lowest-index rule still counts: the other order of classes would lose it.)
    """
    for c in (2, 3):
        for k in range(1, 10):
            for counts in compositions(k, c):
                d = int(distance_to_instability(torch.tensor([counts]))[0])
                label = int(top_label(torch.tensor([counts]))[0])
                frontier = {tuple(counts)}
                for _ in range(d):
                    frontier = {tuple(m) for h in frontier for m in single_moves(list(h))}
                    labels = top_label(torch.tensor(sorted(frontier)))
                    assert bool((labels == label).all()), counts
                after = {tuple(m) for h in frontier for m in single_moves(list(h))}
                if after:
                    reached = torch.tensor(sorted(after))
                    assert bool(((top_label(reached) != label) | (vote_gap(reached) == 0)).any()), counts


def test_soft_histograms_blocked_equals_unblocked(monkeypatch: pytest.MonkeyPatch, generator: torch.Generator) -> None:
    from pate_stab.aggregation import votes

    scores = torch.rand(7, 103, generator=generator, dtype=torch.float32)
    whole = gamma_histogram(scores, 0.1), shifted_gamma_histogram(scores, 0.1)
    monkeypatch.setattr(votes, "_ELEMENTS_PER_BLOCK", 7 * 10)  # blocks of 10 queries
    assert torch.equal(gamma_histogram(scores, 0.1), whole[0])
    assert torch.equal(shifted_gamma_histogram(scores, 0.1), whole[1])

"""The accounting vocabulary: events (what a mechanism did) and their composition.

Modules:

- ``composition``: Composition of privacy events: ε(δ), δ(ε), guarantees, and closed-form
  composition bounds.
- ``events``: Privacy events: frozen records of what a mechanism did, and their privacy loss
  distributions.
- ``mechanism_events``: Privacy events of single mechanisms: the event record, its JSON form, one
  event per noise law.
"""

from pate_stab.privacy.accounting.composition import (
    MAX_PLD_EPSILON,
    AccountantName,
    accountant_epsilon,
    advanced_composition_epsilon,
    calibrate_scale,
    check_pld_feasible,
    delta_for_epsilon,
    epsilon_for_delta,
    fresh_accountant,
    implies_guarantee,
    optimal_homogeneous_composition_delta,
    zcdp_guess,
)

__all__ = [
    "AccountantName",
    "MAX_PLD_EPSILON",
    "accountant_epsilon",
    "calibrate_scale",
    "check_pld_feasible",
    "fresh_accountant",
    "zcdp_guess",
    "epsilon_for_delta",
    "delta_for_epsilon",
    "implies_guarantee",
    "advanced_composition_epsilon",
    "optimal_homogeneous_composition_delta",
]

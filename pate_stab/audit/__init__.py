"""pate_stab.audit: empirical privacy auditing — evidence from samples that a privacy claim is wrong.

* :mod:`~pate_stab.audit.harness` — the statistical DP test: event selection on one sample, a
  Clopper–Pearson lower bound on ε from another (:func:`dp_test`).
* :mod:`~pate_stab.audit.mechanism_samplers` — the package's mechanisms and deliberately broken
  variants as samplers, vectorised over runs.
* :mod:`~pate_stab.audit.mechanism_cases` — those samplers as test cases (neighbouring inputs,
  claims), and the table of results (:func:`audit_mechanisms`).
* :mod:`~pate_stab.audit.erm_cases` — the convex-ERM, selection and density mechanisms as cases.
* :mod:`~pate_stab.audit.releaser_cases` — the stability releasers vectorised over runs, as cases.
* :mod:`~pate_stab.audit.one_run` — one-run canary audits (Steinke, Nasr & Jagielski 2023).
* :mod:`~pate_stab.audit.transfer_canary` — a one-run canary audit of the knowledge-transfer pipeline.

Within the package imports flow one way: harness ← erm_cases ← mechanism_cases, harness ←
mechanism_samplers ← mechanism_cases, harness ← releaser_cases, one_run ← transfer_canary.
"""

# The case lists (mechanism_cases(), releaser_cases(), ...) are imported from their modules: a
# function re-exported here under its module's name would hide the module. transfer_canary is
# imported by its path too: it trains students, and importing the DP test should not load Lightning.
from pate_stab.audit.harness import DPTestResult, Mechanism, MechanismCase, clopper_pearson, dp_test, encode_rows
from pate_stab.audit.mechanism_cases import AuditRow, audit_mechanisms
from pate_stab.audit.one_run import OneRunAudit, best_one_run_audit, one_run_audit, one_run_epsilon_lower_bound

__all__ = [
    "AuditRow",
    "DPTestResult",
    "Mechanism",
    "MechanismCase",
    "OneRunAudit",
    "audit_mechanisms",
    "best_one_run_audit",
    "clopper_pearson",
    "dp_test",
    "encode_rows",
    "one_run_audit",
    "one_run_epsilon_lower_bound",
]

"""pate_stab.audit: empirical privacy auditing — evidence from samples that a privacy claim is wrong.

* :mod:`~pate_stab.audit.harness` — the statistical DP test: event selection on one sample, a
  Clopper–Pearson lower bound on ε from another (:func:`dp_test`).
* :mod:`~pate_stab.audit.mechanism_cases` — the package's mechanisms and deliberately broken
  variants as test cases, and the table of results (:func:`audit_mechanisms`).
* :mod:`~pate_stab.audit.erm_cases` — the convex-ERM, selection and density mechanisms as cases.
* :mod:`~pate_stab.audit.releaser_cases` — the stability releasers vectorised over runs, as cases.
* :mod:`~pate_stab.audit.one_run` — one-run canary audits (Steinke, Nasr & Jagielski 2023).
* :mod:`~pate_stab.audit.transfer_canary` — a one-run canary audit of the knowledge-transfer pipeline.
"""

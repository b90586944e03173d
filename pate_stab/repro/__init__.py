"""Paper reproductions' protocols: what the entry scripts under ``recipes/repro/`` and the tests share.

* :mod:`pate_stab.repro.cv2013` -- Chaudhuri & Vinterbo 2013, Fig. 1: the cross-validation loop,
  the private data protocol (public bounds) and the paper's (ranges and predictors read from the
  data: **not private**, as in the paper).
* :mod:`pate_stab.repro.glm_step` -- R's ``glm`` (binomial, logit) and ``step`` (AIC), which the
  paper used to choose Adult's predictors.
* :mod:`pate_stab.repro.cv2013_direction` -- why Random trails Control on Adult under min-max scaling.
* :mod:`pate_stab.repro.wu2016_inversion` -- Wu et al. 2016, Sec. 5: output and objective
  perturbation on the warfarin table and the model-inversion attack on each model.
* :mod:`pate_stab.repro.pac_plot` -- Bassily, Thakkar & Thakurta 2018: the log-log panel of the
  PAC curves (``recipes/repro/pac_rates.py``, ``pac_curves.py``).
* :mod:`pate_stab.repro.pac_sim` -- Bassily, Thakkar & Thakurta 2018, §4: the fast exact simulation
  of the releaser and the learners behind ``recipes/repro/pac_rates.py`` (1-D classes; halfspaces in
  :mod:`pate_stab.repro.pac_sim_halfspaces` and :mod:`pate_stab.repro.pac_sim_homogeneous`).

This package sits at the top of the import order beside ``run`` and ``audit``: it imports
``data``, ``erm``, ``theory`` and ``rng``, and no module of the library imports it. Its paper protocols read
statistics of every row and are no release path; results and verdicts are in
``docs/results/repro/README.md``.
"""

__all__ = [
    "cv2013",
    "cv2013_direction",
    "glm_step",
    "pac_plot",
    "pac_sim",
    "pac_sim_halfspaces",
    "pac_sim_homogeneous",
    "wu2016_inversion",
]

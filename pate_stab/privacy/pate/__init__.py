"""PATE's privacy analysis (PAE+17, PSM+18): data-dependent RDP, smooth sensitivity, GNSS.

Modules:

- ``data_dependent``: PATE's data-dependent privacy of a whole run, and the smooth-sensitivity
  release of its ε.
- ``rdp``: PATE's data-dependent RDP bounds of one query, and RDP → (ε, δ).
- ``smooth_sensitivity``: Smooth sensitivity of PATE's data-dependent RDP, and the GNSS release of a
  value [PSM+18].
"""

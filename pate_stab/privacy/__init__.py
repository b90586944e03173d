"""Pure privacy mechanisms and privacy math.

This subpackage imports neither Lightning nor any model code (a test checks it). Modules:

- ``noise``: Laplace / exponential / Gaussian samplers (float64, explicit generator).
- ``sparse_vector``: sparse vector with cutoff (BTT18 Alg 1), InteractiveAboveThreshold (Ligett et al. Alg 2).
- ``stability``: distance-to-instability test (BTT18 Alg 2), online query release (Alg 3).
- ``noise_reduction``: gradual release (Ligett et al. Alg 1, after Koufogiannis et al.).
- ``calibration``: noise scale, threshold and δ split from (ε, δ, m, T).
- ``accounting``: privacy events, composition through dp-accounting, the persistent ledger.
- ``pate_data_dependent``: PATE's data-dependent RDP of LNMax / GNMax / Confident-GNMax runs, its
  smooth sensitivity and sanitised release (``data_dependent_summary``).
"""

__all__ = ["noise", "sparse_vector", "stability", "noise_reduction", "calibration", "accounting", "pate_data_dependent"]

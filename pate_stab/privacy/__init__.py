"""Pure privacy mechanisms and privacy math.

This subpackage imports neither Lightning nor any model code (a test checks it). Modules:

- ``noise``: Laplace / exponential / Gaussian / l2-Laplace samplers (float64, explicit generator).
- ``secure_noise``: exact discrete Laplace and the snapping mechanism from the OS's CSPRNG.
- ``sparse_vector``: sparse vector with cutoff (BTT18 Alg 1), its noise source a parameter (secure or seeded);
  InteractiveAboveThreshold (Ligett et al. Alg 2).
- ``exponential``: the exponential mechanism (McSherry & Talwar 2007).
- ``stability``: distance-to-instability test (BTT18 Alg 2), online query release (Alg 3).
- ``noise_reduction``: gradual release (Ligett et al. Alg 1, after Koufogiannis et al.).
- ``calibration``: noise scale, threshold and δ split from (ε, δ, m, T).
- ``events``: frozen records of what a mechanism did (one vocabulary for every spend), each with its
  pessimistic PLD and its dp-accounting counterpart.
- ``accounting``: composition of events through dp-accounting: ε(δ), δ(ε), guarantees; the PLD / RDP
  accountants and noise calibration of PATE's aggregators.
- ``ledger``: the persistent, append-only privacy ledger of a run.
- ``pate_rdp``: PATE's data-dependent RDP of one LNMax / GNMax / threshold-check query; RDP → (ε, δ).
- ``smooth_sensitivity``: local and smooth sensitivity of that RDP, and the GNSS release (PSM+18).
- ``pate_analysis``: the data-dependent RDP of whole runs and its sanitised release
  (``data_dependent_summary``).
"""

__all__ = [
    "noise",
    "secure_noise",
    "sparse_vector",
    "exponential",
    "stability",
    "noise_reduction",
    "calibration",
    "events",
    "accounting",
    "ledger",
    "pate_rdp",
    "smooth_sensitivity",
    "pate_analysis",
]

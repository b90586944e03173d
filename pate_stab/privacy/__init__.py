"""Pure privacy mechanisms and privacy math.

This subpackage imports neither Lightning nor any model code (a test checks it). Its sub-packages,
each importing only from itself and the ones listed before it (``mechanisms`` and ``pate`` sit
beside each other):

- ``noise`` (``discrete``, ``lattice``, ``secure``, ``seeded``): Noise samplers: float64 from a
  torch.Generator, exact discrete noise from the OS's CSPRNG.
- ``accounting`` (``composition``, ``events``, ``mechanism_events``): The accounting vocabulary: events
  (what a mechanism did) and their composition.
- ``mechanisms`` (``alibi``, ``calibration``, ``exponential``, ``noise_reduction``,
  ``randomized_response``, ``sparse_vector``, ``stability``): Privacy mechanisms, one family per
  module, and the stability releasers' calibration.
- ``pate`` (``data_dependent``, ``rdp``, ``smooth_sensitivity``): PATE's privacy analysis (PAE+17,
  PSM+18): data-dependent RDP, smooth sensitivity, GNSS.
- ``ledger`` (``file``, ``format``, ``privacy_ledger``, ``private_files``): The persistent privacy
  ledger of a run and the run folder's private files.
"""

__all__ = ["noise", "accounting", "mechanisms", "pate", "ledger"]

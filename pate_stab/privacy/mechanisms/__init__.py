"""Privacy mechanisms, one family per module, and the stability releasers' calibration.

Modules:

- ``alibi``: ALIBI's label release: Laplace noise on the one-hot label, exact, and its Bayesian
  posterior.
- ``calibration``: Calibration of the stability releasers: noise scale λ, threshold w and the δ
  split.
- ``exponential``: The exponential mechanism (McSherry & Talwar 2007), sampled exactly by the
  Gumbel-max trick.
- ``noise_reduction``: Gradual release by noise reduction (Koufogiannis, Han & Pappas 2015; Ligett
  et al. 2017, Alg 1).
- ``randomized_response``: Randomised response with a prior (RR-with-prior): ε-label-DP labels,
  drawn exactly.
- ``sparse_vector``: Sparse vector with a cutoff (BTT18 Alg 1); InteractiveAboveThreshold (Ligett et
  al. Alg 2) is one of its configurations.
- ``stability``: Distance to instability (BTT18 Alg 2, after Smith & Thakurta 2013) and online query
  release (Alg 3).
"""

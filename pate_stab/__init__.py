"""pate_stab: label-private learning through stability.

Teachers trained on disjoint shards of private data, a private online releaser of their votes
(Bassily, Thakkar & Thakurta 2018), students trained on what was released, and the baselines
it is compared against (PATE's aggregators, private convex ERM).
"""

from pate_stab.errors import BudgetExhaustedError, LedgerError, PateStabError

__all__ = ["BudgetExhaustedError", "LedgerError", "PateStabError", "__version__"]
__version__ = "0.1.0"

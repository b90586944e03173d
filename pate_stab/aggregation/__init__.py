"""pate_stab.aggregation."""

"""pate_stab.data."""

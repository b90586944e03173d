"""pate_stab.student."""

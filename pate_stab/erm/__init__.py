"""pate_stab.erm."""

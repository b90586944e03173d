"""pate_stab.theory."""

"""pate_stab.teachers."""

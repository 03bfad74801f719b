"""compress."""

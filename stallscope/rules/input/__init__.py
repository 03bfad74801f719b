"""input rules (one per file)."""

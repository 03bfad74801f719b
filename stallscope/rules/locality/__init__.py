"""locality rules (one per file)."""

"""synchronization rules (one per file)."""

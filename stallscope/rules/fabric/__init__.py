"""fabric rules (one per file)."""

"""Raw-format knowledge: field maps, names and units per input format and version."""

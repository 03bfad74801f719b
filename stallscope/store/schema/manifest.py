"""Tables read from a bundle's manifest.json (collectors)."""

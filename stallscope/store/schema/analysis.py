"""Tables materialized by the analysis stage (clock offsets, collective instances, breakdown)."""

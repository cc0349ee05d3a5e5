"""The thin Dagster layer: assets, IO manager, checks, sensors, versions, run monitoring."""

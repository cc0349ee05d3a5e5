"""slm4ie-assets: the SLM4IE extraction stage as a Dagster asset graph."""

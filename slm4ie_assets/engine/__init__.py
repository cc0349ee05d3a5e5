"""The run engine: which range runs when, the worker pool, progress and stalls."""

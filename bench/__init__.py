"""Benchmarks of the extraction pipeline (`make bench` runs `python -m bench.run`)."""

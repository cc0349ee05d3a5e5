"""`slm4ie`: look at extracted datasets and run the plain-Python pipeline without a Dagster instance.

For people and scripts (HPC batch jobs), not a second orchestrator: it reads the same catalog
(extract.yaml or $SLM4IE_EXTRACT_CONFIG) and writes nothing except where `extract` or `publish` is
asked to. `main.py` parses the command line, `look.py` reads (inspect, stats), `run.py` writes
(extract, a slice of it, publish).
"""

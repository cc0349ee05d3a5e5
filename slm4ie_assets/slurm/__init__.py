"""Slurm as an engine Dagster drives: a run launcher that runs each run as a batch job
(instance setting `run_launcher: {module: slm4ie_assets.slurm, class: SlurmRunLauncher}`)."""

from slm4ie_assets.slurm.launcher import JOB_TAG, SlurmRunLauncher

__all__ = ["JOB_TAG", "SlurmRunLauncher"]

"""The sbatch options of a run worker job: the launcher's config plus a run's own tag.

A deployment sets what every run needs once (partition, CPUs, memory, time limit, account) in the
instance file; a run that needs more (a big dataset) carries the tag `slm4ie/sbatch_args`, e.g.
`--cpus-per-task=16 --mem=64G`, which sbatch reads after the instance's options, so it wins.
"""

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster import Field, IntSource, Noneable, StringSource

RUN_ARGS_TAG = "slm4ie/sbatch_args"

CONFIG_SCHEMA = {
    "partition": Field(Noneable(StringSource), is_required=False, default_value=None,
                       description="sbatch --partition; the cluster's default partition when unset"),
    "cpus_per_task": Field(Noneable(IntSource), is_required=False, default_value=None,
                           description="sbatch --cpus-per-task: the run's extraction pool uses this many "
                                       "workers when the catalog's max_workers is 0"),
    "mem": Field(Noneable(StringSource), is_required=False, default_value=None, description="sbatch --mem"),
    "time_limit": Field(Noneable(StringSource), is_required=False, default_value=None,
                        description="sbatch --time"),
    "extra_args": Field([str], is_required=False, default_value=[],
                        description="more sbatch arguments, one per item, e.g. --account=proj"),
    "log_dir": Field(Noneable(StringSource), is_required=False, default_value=None,
                     description="where each job's output goes (<log_dir>/dagster-run-<run id>-<job id>.log); "
                                 "on the shared file system; default $DAGSTER_HOME/slurm_logs"),
    "python": Field(Noneable(StringSource), is_required=False, default_value=None,
                    description="the interpreter that runs the run worker on the nodes; default the code "
                                "location's own (its path must exist on every node)"),
    "bin_dir": Field(Noneable(StringSource), is_required=False, default_value=None,
                     description="folder of sbatch/scancel/scontrol when they are not on PATH"),
    "cancel_grace_seconds": Field(int, is_required=False, default_value=20,
                                  description="after SIGINT, how long a cancelled run may take to record "
                                              "its cancellation before its job is scancel'd outright"),
}


@dataclass(frozen=True)
class SbatchOptions:
    """The launcher's config, typed."""

    partition: str | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    time_limit: str | None = None
    extra_args: tuple[str, ...] = ()
    log_dir: str | None = None
    python: str | None = None
    bin_dir: str | None = None
    cancel_grace_seconds: int = 20
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "SbatchOptions":
        return cls(partition=config.get("partition"), cpus_per_task=config.get("cpus_per_task"),
                   mem=config.get("mem"), time_limit=config.get("time_limit"),
                   extra_args=tuple(config.get("extra_args") or ()), log_dir=config.get("log_dir"),
                   python=config.get("python"), bin_dir=config.get("bin_dir"),
                   cancel_grace_seconds=int(config.get("cancel_grace_seconds", 20)), raw=dict(config))

    def sbatch_args(self, run_id: str, log_dir: Path, workdir: str, run_tags: dict[str, str]) -> list[str]:
        """Every sbatch argument for one run's job; the run's tag comes last so that it overrides."""
        args = [f"--job-name=dagster-run-{run_id[:8]}", f"--output={log_dir}/dagster-run-{run_id}-%j.log",
                f"--chdir={workdir}", "--export=ALL"]
        if self.partition:
            args.append(f"--partition={self.partition}")
        if self.cpus_per_task:
            args.append(f"--cpus-per-task={self.cpus_per_task}")
        if self.mem:
            args.append(f"--mem={self.mem}")
        if self.time_limit:
            args.append(f"--time={self.time_limit}")
        args += self.extra_args
        args += shlex.split(run_tags.get(RUN_ARGS_TAG, ""))
        return args

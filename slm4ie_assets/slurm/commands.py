"""The three Slurm commands the run launcher needs: `sbatch`, `scancel` and `scontrol show job`.

Plain subprocesses of Slurm's own client tools, so the launcher works wherever a user can submit
jobs by hand (a login node, or the node that runs the Dagster daemon) and needs neither a Slurm REST
daemon nor accounting (`sacct`): `scontrol show job` answers from the controller's memory, which
keeps a finished job for `MinJobAge` seconds (300 by default), long enough for run monitoring.
"""

import subprocess
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 60


class SlurmCommandError(RuntimeError):
    """A Slurm client command failed; the message names the command and quotes its error output."""


@dataclass(frozen=True)
class SlurmJob:
    """What the controller says about one job (`scontrol show job -o`)."""

    job_id: str
    state: str  # PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, NODE_FAIL, OUT_OF_MEMORY, TIMEOUT, ...
    reason: str
    exit_code: str  # "<code>:<signal>"
    nodes: str
    stdout: str

    def describe(self) -> str:
        where = f" on {self.nodes}" if self.nodes and self.nodes != "(null)" else ""
        why = f", reason {self.reason}" if self.reason and self.reason != "None" else ""
        return f"Slurm job {self.job_id}: {self.state}{where}, exit code {self.exit_code}{why}"


def _tool(bin_dir: str | None, name: str) -> str:
    return str(Path(bin_dir) / name) if bin_dir else name


def _run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S,
                              stdin=None if stdin is not None else subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmCommandError(f"`{' '.join(args[:2])} ...` could not run: {exc}") from exc


def submit(script: str, sbatch_args: list[str], bin_dir: str | None = None) -> str:
    """Submit `script` (read by sbatch from stdin) and return the new job's id."""
    args = [_tool(bin_dir, "sbatch"), "--parsable", *sbatch_args]
    res = _run(args, stdin=script)
    if res.returncode != 0:
        raise SlurmCommandError(f"sbatch refused the run worker job (exit {res.returncode}): "
                                f"{res.stderr.strip() or res.stdout.strip()}\ncommand: {' '.join(args)}")
    # --parsable prints "<id>" or "<id>;<cluster>"
    return res.stdout.strip().split(";")[0]


def cancel(job_id: str, signal: str | None = None, bin_dir: str | None = None) -> None:
    """`scancel` the job; with `signal`, send it to every process of the job (batch script included)
    instead of ending the job, so the run worker can record its own cancellation."""
    args = [_tool(bin_dir, "scancel")]
    if signal:
        args += [f"--signal={signal}", "--full"]
    res = _run([*args, job_id])
    if res.returncode != 0:
        raise SlurmCommandError(f"scancel {job_id} failed (exit {res.returncode}): {res.stderr.strip()}")


def show_job(job_id: str, bin_dir: str | None = None) -> SlurmJob | None:
    """The job as the controller knows it, or None when it does not know the id (any more).

    Raises SlurmCommandError when the controller cannot be asked at all, so that a caller can tell
    "the job is gone" from "Slurm did not answer"."""
    res = _run([_tool(bin_dir, "scontrol"), "show", "job", "-o", job_id])
    if res.returncode != 0:
        if "Invalid job id" in res.stderr:
            return None
        raise SlurmCommandError(f"scontrol show job {job_id} failed (exit {res.returncode}): {res.stderr.strip()}")
    fields = _fields(res.stdout.strip().splitlines()[0] if res.stdout.strip() else "")
    return SlurmJob(job_id=job_id, state=fields.get("JobState", "UNKNOWN"), reason=fields.get("Reason", ""),
                    exit_code=fields.get("ExitCode", ""), nodes=fields.get("NodeList", ""),
                    stdout=fields.get("StdOut", ""))


def _fields(line: str) -> dict[str, str]:
    """`Key=Value Key=Value ...` of `scontrol -o` (values we read hold no spaces)."""
    out = {}
    for token in line.split(" "):
        key, sep, value = token.partition("=")
        if sep and key not in out:
            out[key] = value
    return out


def cluster_answers(bin_dir: str | None = None) -> bool:
    """True when `sinfo` lists a partition that is up (used by tests and docs checks)."""
    try:
        res = subprocess.run([_tool(bin_dir, "sinfo"), "-h", "-o", "%a"], capture_output=True, text=True,
                             timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return "up" in res.stdout.split()

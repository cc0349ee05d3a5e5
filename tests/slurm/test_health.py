"""What run monitoring is told for each state Slurm reports (slm4ie_assets/slurm/health.py). The test
cluster can produce CANCELLED and FAILED for real (test_dagster_on_slurm.py); node failures, OOM kills
and time limits it cannot, so their wording is checked here from the states `scontrol` prints."""

import pytest
from dagster._core.launcher import WorkerStatus

from slm4ie_assets.slurm.commands import SlurmJob
from slm4ie_assets.slurm.health import health_of


def job(state: str, exit_code: str = "0:0") -> SlurmJob:
    return SlurmJob("42", state, "None", exit_code, "big", "/shared/logs/j.log")


@pytest.mark.parametrize("state", ["PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED"])
def test_a_job_that_may_still_work_is_healthy(state):
    assert health_of("42", job(state)).status == WorkerStatus.RUNNING


@pytest.mark.parametrize(("state", "words"), [
    ("CANCELLED", "was cancelled"), ("NODE_FAIL", "its node failed"), ("OUT_OF_MEMORY", "raise --mem"),
    ("TIMEOUT", "raise --time"), ("FAILED", "exited with an error"), ("COMPLETED", "exited without"),
    ("PREEMPTED", "preempted"), ("BOOT_FAIL", "boot"), ("DEADLINE", "deadline")])
def test_a_job_that_ended_under_a_started_run_fails_it_in_words(state, words):
    result = health_of("42", job(state, "0:9"))
    assert result.status == WorkerStatus.FAILED
    assert words in result.msg and "Slurm job 42" in result.msg and "on big" in result.msg
    assert "launch it again" in result.msg


def test_a_job_the_controller_no_longer_knows_is_not_found():
    result = health_of("42", None)
    assert result.status == WorkerStatus.NOT_FOUND and "MinJobAge" in result.msg

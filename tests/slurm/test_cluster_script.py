"""deploy/slurm/one-node-cluster.sh: `stop` ends every daemon `start` started, munged included (`make
slurm-down` at the end of .ci/run used to leave munged running: the script recorded the pid of munged's
exiting parent). The test starts a second cluster of its own under a temp folder (SLM4IE_SLURM_HOME,
its own ports and munged socket), so the machine's cluster, which other tests use, is left alone."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from support.slurm import CLUSTER_SCRIPT
from support.ui import free_port

DAEMONS = ("munged", "slurmctld", "slurmd")


def daemons_of(home: Path) -> dict[int, str]:
    """Live processes of the cluster under `home`: its path is in their command line (munged) or in
    their environment (SLURM_CONF, which the Slurm daemons inherit from the script)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if str(home).encode() in cmdline or f"SLURM_CONF={home}/".encode() in environ:
            found[int(entry.name)] = os.path.basename(cmdline.split(b" ")[0].decode(errors="replace"))
    return found


def script(action: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(CLUSTER_SCRIPT), action], env=env, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_stop_ends_every_daemon_start_started_munged_included():
    if os.geteuid() != 0 or not all(shutil.which(d, path="/usr/sbin:/usr/bin") for d in DAEMONS):
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("CI=true: the Slurm and munge daemons must be installed (make test-deps) and run as root")
        pytest.skip("needs root and Debian's slurm-wlm and munge")
    # not under pytest's tmp_path, whose folders are private to root: munged runs as `munge` and must
    # reach its socket's folder
    home = Path(tempfile.mkdtemp(prefix="slm4ie-slurm-test-"))
    home.chmod(0o755)
    env = {**os.environ, "SLM4IE_SLURM_HOME": str(home),
           "SLM4IE_SLURM_PORTS": " ".join(str(free_port()) for _ in range(3))}
    env.pop("SLURM_CONF", None)
    try:
        started = script("start", env)
        assert started.returncode == 0, started.stdout + started.stderr
        running = daemons_of(home)
        assert sorted(n for n in running.values() if n in DAEMONS) == ["munged", "slurmctld", "slurmd", "slurmd"], \
            running
        assert script("status", env).returncode == 0

        stopped = script("stop", env)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        deadline = time.monotonic() + 10
        while daemons_of(home) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert daemons_of(home) == {}, daemons_of(home)
        assert not list((home / "run").glob("*.pid"))
    finally:
        script("stop", env)
        for pid in daemons_of(home):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        shutil.rmtree(home, ignore_errors=True)

#!/usr/bin/env python3
"""From a file dropped into raw/<key>/ to the published file, under `dg dev` as a user starts it.

    .venv/bin/python bench/sensor_latency.py [--rounds 5] [--keep DIR] [--json OUT]

Builds a one-dataset project in a temp folder (a text dataset with the catalog's default sensor
settings: watch_interval, settle_seconds), an instance from `make home` (deploy/dagster.instance.yaml),
and starts `dg dev` from the project root with that DAGSTER_HOME, as README's tour does. Once the
sensor's first publish is done and no run is left, each round, alternately:
  - cp: a new file copied in with `cp` (its mtime is the copy's time);
  - mv: a file written two minutes earlier in a folder beside raw/, moved in with `mv` (its mtime
    stays old, so the sensor may plan it at its first look).
Before each drop it waits a random 0-30 s (seeded), so drops fall anywhere in the sensor's 30 s tick
rather than at the phase the previous round ended on. It measures the seconds from just before the
command to the moment the published manifest names the new shard, the runs the change started, and
the host's load average. Run it from the checkout to
measure (it uses that checkout's `dg` and code). Timings depend on the host's load: say it.
"""

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin"
KEY = "lat_txt"
ROUND_TIMEOUT = 400.0
TICK = 30.0  # the catalog's default watch_interval


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def project(base: Path) -> Path:
    raw = base / "raw" / KEY
    raw.mkdir(parents=True)
    for i in range(3):
        (raw / f"start_{i}.txt").write_text(f"Začetni dokument {i}.\n\nŠe en odstavek {i}.\n", encoding="utf-8")
    config = base / "extract.yaml"
    config.write_text(f"input_dir: {base / 'raw'}\noutput_dir: {base / 'out'}\n"
                      f"datasets:\n  {KEY}:\n    extractor: text\n    domain: bench\n", encoding="utf-8")
    return config


def published_keys(base: Path) -> set[str]:
    manifest = base / "out" / ".slm4ie" / KEY / "current" / "manifest.json"
    try:
        return {key for key, _ in json.loads(manifest.read_bytes())["shards"]}
    except (OSError, ValueError, KeyError):
        return set()


class Runs:
    """The instance's run records, read from the storage `dg dev` writes."""

    def __init__(self, home: Path):
        from dagster import DagsterInstance

        self.instance = DagsterInstance.from_config(str(home))

    def ids(self) -> list[str]:
        return [r.dagster_run.run_id for r in self.instance.get_run_records()]

    def busy(self) -> bool:
        from dagster import DagsterRunStatus, RunsFilter

        live = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
                DagsterRunStatus.STARTED]
        return bool(self.instance.get_run_records(RunsFilter(statuses=live)))

    def selections(self, run_ids: list[str]) -> list[str]:
        out = []
        for run_id in run_ids:
            run = self.instance.get_run_by_id(run_id)
            keys = sorted(k.to_user_string() for k in (run.asset_selection or []))
            out.append(f"{'+'.join(keys)}[{run.tags.get('dagster/partition', '')}]:{run.status.value}")
        return out


def wait(predicate, timeout: float, what: str, dev: subprocess.Popen, log: Path, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if dev.poll() is not None:
            sys.exit(f"dg dev exited ({dev.returncode}):\n{log.read_text(errors='replace')[-4000:]}")
        if predicate():
            return
        time.sleep(poll)
    sys.exit(f"timed out after {timeout:.0f}s waiting for {what}:\n{log.read_text(errors='replace')[-4000:]}")


def one_round(kind: str, n: int, base: Path, runs: Runs, dev, log: Path, pause: float) -> dict:
    staging = base / "staging"
    staging.mkdir(exist_ok=True)
    name = f"{kind}_{n}.txt"
    src = staging / name
    src.write_text("".join(f"Nov dokument {n}, odstavek {i}.\n\n" for i in range(200)), encoding="utf-8")
    old = time.time() - 120
    os.utime(src, (old, old))
    time.sleep(pause)
    before = set(runs.ids())
    load = os.getloadavg()[0]
    start = time.monotonic()
    subprocess.run(["cp" if kind == "cp" else "mv", str(src), str(base / "raw" / KEY / name)], check=True)
    wait(lambda: name in published_keys(base), ROUND_TIMEOUT, f"{name} to be published", dev, log)
    seconds = time.monotonic() - start
    wait(lambda: not runs.busy(), ROUND_TIMEOUT, "the runs to end", dev, log, poll=0.5)
    new = [r for r in runs.ids() if r not in before]
    return {"kind": kind, "seconds": round(seconds, 1), "runs": len(new), "which": runs.selections(new),
            "load1": round(load, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each kind (cp and mv), alternating")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the rounds here")
    parser.add_argument("--seed", type=int, default=1, help="of the random pauses before the drops")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="sensor_latency_"))
    base.mkdir(parents=True, exist_ok=True)
    config = project(base)
    home = base / "dagster_home"
    subprocess.run(["make", "-s", "home", f"DAGSTER_HOME={home}"], cwd=REPO, check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env.update(SLM4IE_EXTRACT_CONFIG=str(config), DAGSTER_HOME=str(home), VIRTUAL_ENV=str(VENV_BIN.parent),
               PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}")
    log = base / "dg_dev.log"
    with open(log, "wb") as sink:
        dev = subprocess.Popen([str(VENV_BIN / "dg"), "dev", "-h", "127.0.0.1", "-p", str(free_port())], cwd=REPO,
                               env=env, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    rounds = []
    try:
        started = time.monotonic()
        wait(lambda: len(published_keys(base)) == 3, ROUND_TIMEOUT, "the first publish", dev, log)
        print(f"first publish {time.monotonic() - started:.0f}s after dg dev started", flush=True)
        runs = Runs(home)
        wait(lambda: not runs.busy(), ROUND_TIMEOUT, "the first runs to end", dev, log, poll=0.5)
        pauses = random.Random(args.seed)
        for n in range(args.rounds):
            for kind in ("cp", "mv"):
                rounds.append(one_round(kind, n, base, runs, dev, log, pauses.uniform(0, TICK)))
                print(json.dumps(rounds[-1]), flush=True)
    finally:
        os.killpg(dev.pid, 2)  # Ctrl-C to dg dev's group
        try:
            dev.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, 9)
            dev.wait()
    for kind in ("cp", "mv"):
        secs = [r["seconds"] for r in rounds if r["kind"] == kind]
        if secs:
            print(f"{kind}: median {statistics.median(secs):.0f}s, min {min(secs):.0f}s, max {max(secs):.0f}s "
                  f"({', '.join(f'{s:.0f}' for s in secs)}); runs per change "
                  f"{sorted({r['runs'] for r in rounds if r['kind'] == kind})}")
    print(f"load average over the rounds: {statistics.mean(r['load1'] for r in rounds):.1f} (1 min, at each drop); "
          f"{os.cpu_count()} cores")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=1))
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

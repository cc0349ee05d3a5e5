"""Progress lines and the run summary reach Dagster's structured event log (what the UI's run view
shows) and the output of the literal `dagster asset materialize` (issue 15, item 1).

Through real parts: `materialize()` on a real instance in a temp DAGSTER_HOME with a 2-worker spawn
pool, and the venv's `dagster` CLI in a subprocess. Pool workers never log (DAGSTER_NOTES 5): the
lines come from the step process through `context.log`, so they are in the event log.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from dagster import AssetKey, materialize

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.definitions import build_definitions

KEY = "big"
REPO = Path(__file__).resolve().parents[2]
PROGRESS = re.compile(r"big: (?P<mb>\d+\.\d) of (?P<total>\d+\.\d) MB \(\d+%\), (?P<done>\d+) of \d+ shards, "
                      r"[\d,]+ documents, \d+\.\d MB/s, ETA \S+")
FINAL = re.compile(r"big: done: (?P<mb>\d+\.\d) of (?P<total>\d+\.\d) MB \(100%\)")
PARAGRAPH = ("Maribor leži ob Dravi med Pohorjem in Slovenskimi goricami; je drugo največje mesto v "
             "državi in središče Štajerske.\n\n").encode()


def write_corpus(root: Path, sizes_mb: list[int]) -> Path:
    raw = root / "raw" / KEY
    raw.mkdir(parents=True)
    for i, mb in enumerate(sizes_mb):
        (raw / f"part_{i}.txt").write_bytes(PARAGRAPH * (mb * 1_000_000 // len(PARAGRAPH)))
    config = root / "extract.yaml"
    config.write_text(f"input_dir: {root / 'raw'}\noutput_dir: {root / 'out'}\n"
                      f"datasets:\n  {KEY}:\n    extractor: text\n    domain: test\n")
    return config


def check_order(messages: list[str], sizes_mb: list[int]) -> None:
    """Several progress lines with MB done never going back, then the final line, then the table; some
    line shows more MB than its finished files (at most the largest ones) hold: bytes read inside a
    running file, wherever in the run the logging thread got its turn."""
    progress = [(i, m) for i, text in enumerate(messages) if (m := PROGRESS.search(text))]
    final = [i for i, text in enumerate(messages) if FINAL.search(text)]
    summary = [i for i, text in enumerate(messages) if f"{KEY}: run summary" in text]
    assert len(progress) >= 2, messages
    assert len(final) == 1 and len(summary) == 1, messages
    assert progress[-1][0] < final[0] < summary[0]
    mbs = [float(m["mb"]) for _, m in progress]
    assert mbs == sorted(mbs) and mbs[0] < float(progress[0][1]["total"]), mbs
    largest = sorted(sizes_mb, reverse=True)
    assert any(float(m["mb"]) > sum(largest[:int(m["done"])]) + 0.05 for _, m in progress), messages


def test_materialize_with_two_workers_puts_progress_and_summary_in_the_run_event_log(tmp_path, instance):
    # many 4 MiB reads per file, so progress lines fall between them even on a loaded machine
    sizes_mb = [40, 32]
    defs = build_definitions(load_catalog(write_corpus(tmp_path, sizes_mb)))
    result = materialize(
        list(defs.assets or []), instance=instance, resources=dict(defs.resources or {}),
        selection=[AssetKey(["extracted", KEY])],
        run_config={"resources": {"extract": {"config": {"max_workers": 2, "progress_seconds": 0.01}}}},
    )
    assert result.success
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    check_order(messages, sizes_mb)
    records = instance.get_records_for_run(result.run_id).records
    assert sum(1 for r in records if PROGRESS.search(r.event_log_entry.user_message)) >= 2
    [table] = [text for text in messages if f"{KEY}: run summary" in text]
    assert "documents" in table and "published" in table and "dropped" in table


def test_the_literal_cli_prints_progress_lines_and_the_summary(tmp_path):
    config = write_corpus(tmp_path, [12])  # one file: every progress line is inside it
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DAGSTER_", "SLM4IE_"))}
    env.update(SLM4IE_EXTRACT_CONFIG=str(config), DAGSTER_HOME=str(home), SLM4IE_PROGRESS_SECONDS="0.01")
    dagster = Path(sys.executable).parent / "dagster"
    res = subprocess.run([str(dagster), "asset", "materialize", "-m", "slm4ie_assets.definitions",
                          "--select", f"extracted/{KEY}"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    output = res.stdout + res.stderr
    assert res.returncode == 0, output
    lines = output.splitlines()
    check_order(lines, [12])
    assert any(line.strip().startswith("documents") for line in lines), output

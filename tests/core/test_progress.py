"""Progress lines and the end-of-run summary of the plain pipeline (issue 15, item 1).

Real files, the real pipeline, serial and with a real 2-worker spawn pool. The interval is tiny so
a few megabytes take several intervals; the assertions are on which lines appear, their order and
that the numbers only grow, never on how long anything took.
"""

import re
from pathlib import Path

import pytest

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.engine.progress import INTERVAL_ENV, ProgressLine, duration, human_bytes, progress_interval
from slm4ie_assets.pipeline import extract_and_publish, extract_dataset, plan_dataset

KEY = "big"
LINE = re.compile(r"^big: (?P<mb>\d+\.\d) of (?P<total>\d+\.\d) MB \((?P<pct>\d+)%\), (?P<done>\d+) of "
                  r"(?P<shards>\d+) shards, (?P<docs>[\d,]+) documents, (?P<rate>\d+\.\d) MB/s, ETA (?P<eta>\S+)$")
FINAL = re.compile(r"^big: done: (?P<mb>\d+\.\d) of (?P<total>\d+\.\d) MB \(100%\), (?P<done>\d+) of "
                   r"(?P<shards>\d+) shards, (?P<docs>[\d,]+) documents in \S+ \(\d+\.\d MB/s\)$")
PARAGRAPH = ("Ljubljana je glavno mesto Slovenije in njeno politično, gospodarsko in kulturno središče; "
             "skozi mesto teče Ljubljanica, nad njim stoji grad.\n\n")


def write_corpus(root: Path, sizes_mb: list[int], bad_block: bool = False) -> Path:
    """A text dataset of one file per size (a paragraph is one document); returns extract.yaml."""
    raw = root / "raw" / KEY
    raw.mkdir(parents=True)
    for i, mb in enumerate(sizes_mb):
        n = mb * 1_000_000 // len(PARAGRAPH.encode())
        with open(raw / f"part_{i}.txt", "wb") as fh:
            if bad_block and i == 0:
                fh.write(b"\xff\xfe not utf-8\n\n")
            fh.write(PARAGRAPH.encode() * n)
    config = root / "extract.yaml"
    config.write_text(f"input_dir: {root / 'raw'}\noutput_dir: {root / 'out'}\n"
                      f"datasets:\n  {KEY}:\n    extractor: text\n    domain: test\n")
    return config


def run(config: Path, workers: int, seconds: float = 0.01):
    catalog = load_catalog(config)
    lines: list[str] = []
    plan = plan_dataset(catalog.dataset(KEY), force=True, workers=workers, progress_seconds=seconds)
    report = extract_and_publish(plan, log=lines.append)
    return report, [line for line in lines if line.startswith(f"{KEY}: ")]


def progress_of(lines: list[str]) -> list[re.Match]:
    return [m for line in lines if (m := LINE.match(line))]


def beyond_finished_shards(progress: list[re.Match], report) -> tuple[list[re.Match], list[re.Match]]:
    """Lines whose MB, and lines whose documents, exceed what the shards counted as done could hold
    (the largest ones): only the running shards' live counters explain the excess. Looking over the
    whole run, not only before the first shard ends, keeps this true on a loaded machine, where the
    calling process may not log at all for the few tenths of a second one shard takes."""
    sizes = sorted((p.input_bytes for p in report.parts), reverse=True)
    docs = sorted((p.docs for p in report.parts), reverse=True)
    by_bytes = [m for m in progress if float(m["mb"]) > sum(sizes[:int(m["done"])]) / 1e6 + 0.05]
    by_docs = [m for m in progress if int(m["docs"].replace(",", "")) > sum(docs[:int(m["done"])])]
    return by_bytes, by_docs


def check_shape(lines: list[str], report) -> list[re.Match]:
    """Progress lines, then one final line, then the summary table; MB done never goes back."""
    progress = progress_of(lines)
    finals = [i for i, line in enumerate(lines) if FINAL.match(line)]
    summaries = [i for i, line in enumerate(lines) if line.startswith(f"{KEY}: run summary\n")]
    assert len(progress) >= 2, lines
    assert len(finals) == 1 and len(summaries) == 1, lines
    last_progress = max(i for i, line in enumerate(lines) if LINE.match(line))
    assert last_progress < finals[0] < summaries[0]
    mbs = [float(m["mb"]) for m in progress]
    assert mbs == sorted(mbs), mbs
    docs = [int(m["docs"].replace(",", "")) for m in progress]
    assert docs == sorted(docs), docs
    total = float(progress[0]["total"])
    assert total == pytest.approx(sum(p.input_bytes for p in report.parts) / 1e6, abs=0.05)
    assert all(m["eta"] != "" for m in progress)
    final = FINAL.match(lines[finals[0]])
    assert final is not None and float(final["mb"]) == total
    assert int(final["docs"].replace(",", "")) == report.manifest.docs
    return progress


def test_serial_run_reports_progress_inside_one_big_file_with_an_eta_then_a_summary(tmp_path):
    report, lines = run(write_corpus(tmp_path, [12]), workers=1)
    progress = check_shape(lines, report)
    # bytes read inside the file, before its shard is done: sampled from the open file's offset
    inside = [m for m in progress if m["done"] == "0" and 0 < float(m["mb"]) < float(m["total"])]
    assert inside, lines
    assert any(m["eta"] not in ("unknown",) for m in inside)
    assert all(re.fullmatch(r"\d+\.\ds|\d+m\d\ds|\d+h\d\dm|unknown", m["eta"]) for m in progress)


def test_pooled_run_reports_the_running_shards_progress_from_the_workers(tmp_path):
    report, lines = run(write_corpus(tmp_path, [10, 8, 6]), workers=2)
    progress = check_shape(lines, report)
    assert report.manifest.files == 3
    # the pool's workers publish bytes read and documents written while their shards run
    by_bytes, by_docs = beyond_finished_shards(progress, report)
    assert by_bytes and by_docs, lines
    # every line counts the run's shards: three files, the 10 MB one cut into ranges at the default size
    assert {m["shards"] for m in progress} == {str(len(report.manifest.shards))}
    assert len(report.manifest.shards) > 3


def test_a_per_file_tei_dataset_shows_bytes_read_before_a_files_document(tmp_path):
    """The issue's silent case: one document per 4 MB TEI file, parsed by libxml2 in pool workers."""
    raw = tmp_path / "raw" / KEY
    raw.mkdir(parents=True)
    sentence = "<s>" + "".join(f'<w lemma="beseda">beseda{i}</w>' for i in range(20)) + "</s>"
    for i in range(2):
        body = f"<p>{sentence * (4_000_000 // len(sentence))}</p>"
        (raw / f"doc_{i}.xml").write_text(f'<TEI xmlns="http://www.tei-c.org/ns/1.0"><teiHeader/><text><body>'
                                          f"{body}</body></text></TEI>\n")
    config = tmp_path / "extract.yaml"
    config.write_text(f"input_dir: {tmp_path / 'raw'}\noutput_dir: {tmp_path / 'out'}\n"
                      f"datasets:\n  {KEY}:\n    extractor: tei\n    domain: test\n")
    report, lines = run(config, workers=2)
    progress = check_shape(lines, report)
    assert report.manifest.docs == 2 and report.manifest.tokens > 0
    # bytes of a running file show while it has no document yet (each file holds one)
    by_bytes, _ = beyond_finished_shards(progress, report)
    assert any(m["docs"] == m["done"] for m in by_bytes), lines


def test_summary_table_has_documents_tokens_megabytes_drops_duplicates_and_seconds(tmp_path):
    report, lines = run(write_corpus(tmp_path, [2, 1], bad_block=True), workers=1)
    [table] = [line for line in lines if line.startswith(f"{KEY}: run summary\n")]
    # columns are 2+ spaces apart; a value may hold one space ("3.0 MB")
    cells = [re.split(r"\s{2,}", row.strip()) for row in table.splitlines()[2:]]
    rows = {cell[0]: cell[1:] for cell in cells}
    header = table.splitlines()[1].split()
    assert header == ["this", "run", "published"]
    manifest = report.manifest
    assert rows["documents"] == [f"{manifest.docs:,}"] * 2
    assert rows["annotated"] == ["0.0%", "0.0%"]
    assert rows["tokens"] == ["0", "0"]
    assert rows["shards"] == ["2", "2"]
    assert rows["dropped: invalid_utf8"] == ["1", "1"]
    assert rows["duplicate uids"][-1] == "0"
    assert rows["text"] == [human_bytes(manifest.text_bytes)] * 2  # units follow the size (B, kB, MB, GB)
    assert rows["input rate"][0].endswith("B/s")
    for label in ("input", "sidecar", "seconds"):
        assert label in rows, table
    amount, unit = rows["input"][-1].split()
    assert unit == "MB" and float(amount) == pytest.approx(3.0, abs=0.1)


def test_a_shard_run_logs_progress_and_a_summary_without_a_published_column(tmp_path):
    from slm4ie_assets.pipeline import ShardBatch, extract_shard_batch

    catalog = load_catalog(write_corpus(tmp_path, [3]))
    spec = catalog.dataset(KEY)
    lines: list[str] = []
    report = extract_shard_batch(ShardBatch(spec, plan_dataset(spec).shards, True, 1, 0.01), log=lines.append)
    assert any(FINAL.match(line) for line in lines), lines
    [table] = [line for line in lines if line.startswith(f"{KEY}: run summary\n")]
    assert "published" not in table
    assert f"{report.parts[0].docs:,}" in table


def test_without_a_log_nothing_is_tracked_and_output_is_the_same(tmp_path):
    config = write_corpus(tmp_path, [1])
    catalog = load_catalog(config)
    quiet = extract_dataset(catalog.dataset(KEY), catalog, force=True, workers=1)
    text = (tmp_path / "out" / f"{KEY}.jsonl").read_bytes()
    loud, lines = run(config, workers=1)
    assert (tmp_path / "out" / f"{KEY}.jsonl").read_bytes() == text
    assert quiet.manifest.docs == loud.manifest.docs
    assert lines


def test_the_interval_comes_from_the_setting_then_the_environment_then_ten_seconds(monkeypatch):
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert progress_interval() == 10.0
    monkeypatch.setenv(INTERVAL_ENV, "0.2")
    assert progress_interval() == 0.2
    assert progress_interval(3) == 3.0
    monkeypatch.setenv(INTERVAL_ENV, "soon")
    with pytest.raises(ValueError, match=f"{INTERVAL_ENV}='soon' is not a number of seconds"):
        progress_interval()
    with pytest.raises(ValueError, match="at least 0.01 s"):
        progress_interval(0)


def test_eta_and_durations_read_naturally():
    line = ProgressLine("k", 1, 4, 10, 25_000_000, 100_000_000, 10.0)
    assert line.eta() == "30.0s"
    assert line.render() == "k: 25.0 of 100.0 MB (25%), 1 of 4 shards, 10 documents, 2.5 MB/s, ETA 30.0s"
    assert ProgressLine("k", 0, 1, 0, 0, 5, 1.0).eta() == "unknown"
    assert (duration(8.44), duration(185), duration(7620)) == ("8.4s", "3m05s", "2h07m")


def test_progress_units_adapt_to_the_dataset_and_nothing_reads_zero_of_zero():
    assert ProgressLine("k", 1, 4, 10, 2_500, 10_000, 1.0).render() == \
        "k: 2.5 of 10.0 kB (25%), 1 of 4 shards, 10 documents, 2.5 kB/s, ETA 3.0s"
    assert ProgressLine("k", 0, 2, 0, 300, 900, 1.0).render() == \
        "k: 300 of 900 B (33%), 0 of 2 shards, 0 documents, 300 B/s, ETA 2.0s"
    assert ProgressLine("k", 1, 2, 5, 3 * 10**9, 6 * 10**9, 10.0).render().startswith("k: 3.0 of 6.0 GB (50%)")
    assert ProgressLine("k", 0, 3, 0, 0, 0, 1.0).render() == "k: 0 of 3 shards, 0 documents, starting"
    assert ProgressLine("k", 3, 3, 7, 0, 0, 1.0).render(final=True) == "k: done: 3 of 3 shards, 7 documents in 1.0s"
    assert "unknown" not in ProgressLine("k", 0, 1, 0, 0, 5, 1.0).render()
    assert [human_bytes(n) for n in (0, 999, 1000, 12_345_678, 2 * 10**9)] == \
        ["0 B", "999 B", "1.0 kB", "12.3 MB", "2.0 GB"]

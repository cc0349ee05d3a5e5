"""A small archive or a sample corpus reads in its own unit: archive lines in B or kB with a rate
that is not "0 MB/s", and an input rate in the materialization that does not round to 0."""

import io
import re
import tarfile

import yaml

from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.dagster_layer.materialization_metadata import mb_per_second
from slm4ie_assets.pipeline import extract_dataset
from slm4ie_assets.utils.byte_units import human_bytes, human_rate


def test_a_small_archive_is_logged_in_kb_with_a_rate_above_zero(tmp_path):
    raw = tmp_path / "raw" / "news"
    raw.mkdir(parents=True)
    with tarfile.open(raw / "a.tar.gz", "w:gz") as tar:
        for i in range(2):
            data = (f"Dober dan, to je besedilo številka {i}.\n\n" * 60).encode()
            info = tarfile.TarInfo(f"f{i}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"input_dir": "raw", "output_dir": "out",
                                   "datasets": {"news": {"extractor": "text", "domain": "news"}}}))
    catalog = load_catalog(cfg)
    lines: list[str] = []
    extract_dataset(catalog.dataset("news"), catalog, force=True, workers=1, log=lines.append)
    unpacking = next(line for line in lines if ": unpacking (" in line)
    unpacked = next(line for line in lines if ": unpacked 2 file(s)" in line)
    assert re.search(r"unpacking \([0-9,.]+ (B|kB)\)$", unpacking), unpacking
    assert "0.0 MB" not in unpacked and "(0 MB/s)" not in unpacked, unpacked
    assert re.search(r", [0-9.]+ kB in [0-9.]+s \([0-9.,]+ (kB|MB|GB)/s\)$", unpacked), unpacked


def test_rates_and_sizes_keep_their_digits():
    assert human_bytes(4_200) == "4.2 kB" and human_bytes(999) == "999 B"
    assert human_rate(4_200, 0.5) == "8.4 kB/s"
    assert human_rate(3 * 10**9, 2.0) == "1.5 GB/s"
    assert mb_per_second(4_120, 1.0) == 0.00412  # a sample corpus: not 0
    assert mb_per_second(123_456_789, 1.0) == 123.0
    assert mb_per_second(0, 1.0) == 0.0 and mb_per_second(10, 0.0) == 0.0

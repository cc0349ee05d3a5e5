"""A dataset extracted through the real pipeline in a child process, and that child's own peak RSS
(its VmHWM): what the memory tests of tests/reliability/ bound (docs/memory.md).

Not `os.wait4`'s ru_maxrss: Linux starts it at the forking process's peak and keeps it across exec,
so a pytest worker that once held more than the child (an earlier test's data, or a test's own
expectation built in the parent) raised every child's figure to its own, the one-document baseline
included, and a bound added to that baseline could no longer fail."""

import json
import subprocess
import sys
from pathlib import Path

MB = 1 << 20
CAP = 1_000_000
ALLOWANCE = 40 * MB  # the reader's chunks and their copies (text: 4 MiB reads, conllu: 1 MiB), the writer
_CHILD = """
import json, sys
from slm4ie_assets.catalog import load_catalog
from slm4ie_assets.pipeline import extract_dataset
catalog = load_catalog(sys.argv[1])
report = extract_dataset(catalog.dataset("d"), catalog, force=True, workers=1)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))  # KiB
print(json.dumps([hwm * 1024, report.warnings]))
"""


def peak_of_extraction(root: Path, extractor: str, name: str, write, cap: int = CAP) -> tuple[int, list]:
    """Peak RSS in bytes of a child extracting `raw/d/<name>` (written by `write(fh)`), and the
    run's warnings."""
    raw = root / "raw" / "d"
    raw.mkdir(parents=True)
    with open(raw / name, "w", encoding="utf-8", newline="\n") as fh:
        write(fh)
    yaml = root / "extract.yaml"
    yaml.write_text(f"input_dir: raw\noutput_dir: out\nsplit_bytes: 0\ndatasets:\n  d:\n    extractor: {extractor}\n"
                    f"    domain: test\n    max_document_bytes: {cap}\n")
    with open(root / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(yaml)], cwd=root, stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read() if proc.stdout else b""
        status = proc.wait()
    assert status == 0, (root / "stderr").read_text()[-2000:]
    peak, warnings = json.loads(out.decode().splitlines()[-1])
    return peak, warnings


def write_lines(fh, size: int, line) -> int:
    """Write `line(i)` for i = 1, 2, ... until `size` bytes; the number of lines."""
    n = written = 0
    while written < size:
        n += 1
        s = line(n)
        fh.write(s)
        written += len(s.encode())
    return n

"""A dataset extracted through the real pipeline in a child process, and that child's peak RSS:
what the memory tests of tests/reliability/ bound (docs/memory.md).

Two measures. `os.wait4`'s ru_maxrss (the default, test_memory_caps.py's) starts at the forking
process's peak, which Linux keeps across exec: it is the larger of the pytest worker's peak and the
child's. `own=True` reads the child's VmHWM, its own peak only: a worker that once held more than
the child (an earlier test's data) cannot hide the child's growth under its own figure."""

import json
import os
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


def peak_of_extraction(root: Path, extractor: str, name: str, write, cap: int = CAP,
                       own: bool = False) -> tuple[int, list]:
    """Peak RSS in bytes of a child extracting `raw/d/<name>` (written by `write(fh)`), and the
    run's warnings; `own`: the child's own peak (VmHWM), not ru_maxrss."""
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
        _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, (root / "stderr").read_text()[-2000:]
    hwm, warnings = json.loads(out.decode().splitlines()[-1])
    return (hwm if own else usage.ru_maxrss * 1024), warnings


def write_lines(fh, size: int, line) -> int:
    """Write `line(i)` for i = 1, 2, ... until `size` bytes; the number of lines."""
    n = written = 0
    while written < size:
        n += 1
        s = line(n)
        fh.write(s)
        written += len(s.encode())
    return n

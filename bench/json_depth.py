"""What the JSON nesting limit (D25) costs on the jsonl hot path, and its worst cases.

    python -m bench.json_depth [--mb 20] [--runs 5]

Every jsonl and coleslaw line goes through `records.loads`, which translates the line once (digits
to `0`, `[` and `{` to `(`) to find long digit runs and to count openers (`records._openers_over`);
only a line with more openers than MAX_JSON_DEPTH is read closer (`records.nests_deeper`). This
times, in process CPU per line, median of `--runs`, on the bench's jsonl records with and without
`paragraphs` (`bench.generate.gen_jsonl`): orjson alone; the digit-run check `loads` made before the
limit; the same with the opener count (their difference is the limit's cost); `records.loads`.
Then `nests_deeper` against decoding on lines built to make it work hardest (far deeper than the
limit, wide and deep at once, brackets and escaped quotes in strings).
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.gen_tei import Words
from bench.generate import gen_jsonl
from slm4ie_assets.extractors.records import _DIGIT_RUN, _SCAN, MAX_JSON_DEPTH, _openers_over, loads, nests_deeper


def _digit_check(line: bytes) -> bool:
    """The check `loads` made before the limit: the translation and the digit-run search."""
    return line.translate(_SCAN).find(_DIGIT_RUN) >= 0


def _both_checks(line: bytes) -> bool:
    """What `loads` checks now: the same translation, its openers counted too."""
    scan = line.translate(_SCAN)
    return _openers_over(scan, MAX_JSON_DEPTH) or scan.find(_DIGIT_RUN) >= 0


def _cpu_per_line(fn, lines: list[bytes], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        for line in lines:
            fn(line)
        times.append(time.process_time() - start)
    return statistics.median(times) / len(lines)


def _hard_lines() -> dict[str, bytes]:
    tokens = [{"form": "beseda", "lemma": "beseda", "upos": "NOUN"} for _ in range(10_000)]
    return {
        "100,000 levels deep": b"[" * 100_000 + b"]" * 100_000,
        "1,000 lists 500 deep (1 MB)": b"[" + b",".join([b"[" * 500 + b"1" + b"]" * 500] * 1000) + b"]",
        "1 MB of brackets in a string": b'{"t": "' + b"[{" * 500_000 + b'"}',
        "1 MB of escaped quotes and brackets": b'{"t": "' + b'\\"[' * 300_000 + b'"}',
        "10,000 tokens in one sentence": orjson.dumps({"paragraphs": [{"sentences": [{"tokens": tokens}]}]}),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=20, help="megabytes of jsonl per kind")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for paragraphs in (False, True):
            path = Path(tmp) / f"p{paragraphs}.jsonl"
            rng = random.Random(1)
            gen_jsonl(path, int(args.mb * 1e6), Words(rng), rng, "b", paragraphs=paragraphs)
            lines = path.read_bytes().splitlines()
            per = {name: _cpu_per_line(fn, lines, args.runs) * 1e6 for name, fn in (
                ("orjson", orjson.loads), ("digits", _digit_check), ("both", _both_checks), ("loads", loads))}
            size = sum(map(len, lines)) / len(lines)
            print(f"jsonl{' with paragraphs' if paragraphs else ''}, {len(lines):,} lines of {size:,.0f} B, CPU per "
                  f"line: orjson.loads {per['orjson']:.2f} us; the digit-run check {per['digits']:.2f} us, with the "
                  f"opener count {per['both']:.2f} us (the limit's share: {per['both'] - per['digits']:.2f} us); "
                  f"records.loads {per['loads']:.2f} us")
    for name, line in _hard_lines().items():
        start = time.process_time()
        deeper = nests_deeper(line, MAX_JSON_DEPTH)
        check = time.process_time() - start
        start = time.process_time()
        try:
            loads(line)
        except ValueError:
            pass
        print(f"{name}: nests_deeper {deeper} in {check * 1e3:.1f} ms; records.loads "
              f"{(time.process_time() - start) * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`slm4ie inspect`: read the published version (or one shard's part) and print documents, a page,
a filtered page or a random sample of them, as text or JSON lines (`stats.py` summarises).

Nothing here writes: the version is pinned once (store/published_reader.py: a folder's `current`
resolved, or a bucket's newest commit record), so a publish running meanwhile cannot mix two
versions into one listing, and a bucket's version reads the same from any host. Corpus text and
names pass `output.shown`.
"""

import argparse
import gzip
import itertools
import sys
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import orjson

from ..catalog import DatasetSpec
from ..extractors.drop_ledger import MAX_WARNINGS_KEPT
from ..extractors.tsv_metadata import METADATA_MISSING
from ..store.dataset_store import DatasetStore
from ..store.manifest import Manifest
from ..store.published_reader import PublishedVersion, published_version
from .output import UsageError, json_text, shown, shown_lines
from .select import Numbered, Selection, reservoir, selected

TEXT_CHARS = 1200  # of one document's text; the rest is counted, not printed
# drop-ledger reasons that count an input problem whose documents were kept (not dropped)
KEPT_REASONS = frozenset({METADATA_MISSING})


@dataclass(frozen=True)
class Ledger:
    """A drop ledger split in two: what was dropped, and what was only counted (documents kept)."""

    dropped: dict[str, int]
    kept: dict[str, int]

    @classmethod
    def of(cls, drops: dict[str, int]) -> "Ledger":
        return cls({r: n for r, n in drops.items() if r not in KEPT_REASONS},
                   {r: n for r, n in drops.items() if r in KEPT_REASONS})

    def line(self) -> str:
        """`N item(s) dropped: reason n, ...` and, when there are any, `; kept with a warning: reason n`."""
        text = f"{sum(self.dropped.values()):,} item(s) dropped" + _reasons(self.dropped)
        return text + (f"; kept with a warning{_reasons(self.kept)}" if self.kept else "")


def _reasons(counts: dict[str, int]) -> str:
    return (": " + ", ".join(f"{k} {v:,}" for k, v in counts.items())) if counts else ""


class NothingPublished(Exception):
    """The dataset has no published version (or no such shard part) to read."""


def published(spec: DatasetSpec) -> PublishedVersion:
    """The version to read (store/published_reader.py: a folder's `current`, or a bucket's newest commit)."""
    version = published_version(spec)
    if version is None:
        raise NothingPublished(f"{spec.key} has no published version under {spec.output_location or spec.output_dir} "
                               f"yet (slm4ie extract {spec.key}, or materialize extracted/{spec.key})")
    return version


def inspect(spec: DatasetSpec, args: argparse.Namespace) -> int:
    try:
        if args.dropped:
            print_dropped(spec, published(spec), args.json)
            return 0
        docs = (shard_documents(spec, args.shard) if args.shard is not None
                else published_documents(published(spec)))
    except NothingPublished as exc:
        print(f"slm4ie: {exc}", file=sys.stderr)
        return 1
    selection = Selection(args.grep, tuple(args.where or ()), args.annotated)
    chosen = selected(docs, selection)
    if args.sample is not None:
        shown_docs = reservoir(chosen, args.sample, args.seed)
    else:
        shown_docs = list(itertools.islice(chosen, args.skip, args.skip + args.n))
    if args.json:
        for number, rec, ann in shown_docs:
            print(json_text(document_json(number, rec, ann)))
    else:
        print_documents(shown_docs)
        if not shown_docs:
            print(shown("(no documents" + (f" {selection.describe()}" if selection.describe() else "")
                        + (f" after {args.skip}" if args.skip and args.sample is None else "") + ")"))
    return 0


def document_json(number: int, rec: dict, ann: dict | None) -> dict:
    """One `--json` line: the line number in the file read, the record, and its tokens when annotated."""
    out = {"line": number, **rec}
    if ann is not None and "forms" in ann:
        out["annotations"] = ann
    return out


def _decoded(text: Iterable[bytes], sidecar: Iterable[bytes] | None) -> Iterator[tuple[dict, dict | None]]:
    """Text records with the sidecar line of the same number (None without a sidecar)."""
    side = iter(sidecar) if sidecar is not None else itertools.repeat(None)
    for line, ann in zip(text, side, strict=False):
        yield orjson.loads(line), (orjson.loads(ann) if ann is not None else None)


def published_documents(version: PublishedVersion) -> Iterator[tuple[dict, dict | None]]:
    """The version's documents in order, read as they are asked for: a page of a bucket's version
    fetches the ranges up to it (and a little read-ahead), not the whole object."""
    with version.open_text(page=True) as text, \
            (version.open_sidecar(page=True) if version.sidecar else nullcontext()) as side:
        yield from _decoded(text, side)


def shard_documents(spec: DatasetSpec, shard: str) -> Iterator[tuple[dict, dict | None]]:
    store = DatasetStore(spec)
    meta = store.read_part_meta(shard)
    if meta is None or meta.shard != shard:
        version = published_version(spec)
        if version is None or shard not in {key for key, _ in version.manifest.shards}:
            raise UsageError(f"slm4ie inspect: no shard {shard!r} in {spec.key} (`slm4ie status {spec.key}` "
                             "lists its shard keys)")
        raise NothingPublished(f"{spec.key} has no part for shard {shard!r} (shard keys are paths under "
                               f"{spec.raw_dir}; `slm4ie stats {spec.key}` lists the published ones)")
    paths = store.part_paths(shard)
    # once a part has a sidecar it has a line per document (stubs back-filled), like the published one
    return _part_documents(paths.text, paths.annotations if meta.has_annotations else None)


def _part_documents(text: Path, sidecar: Path | None) -> Iterator[tuple[dict, dict | None]]:
    """A part's documents: parts are local files, on every store (the work folder holds them)."""
    with open(text, "rb") as t, (gzip.open(sidecar, "rb") if sidecar else nullcontext()) as s:
        yield from _decoded(t, s)


def print_documents(docs: list[Numbered]) -> None:
    """`#N` is the document's line in the file read (the published text, or the shard's part)."""
    for number, rec, ann in docs:
        print(f"#{number}  {shown(rec['uid'])}  ({len(rec['text']):,} characters)")
        if rec.get("metadata"):
            print("  metadata: " + json_text(rec["metadata"]))
        text = rec["text"]
        rest = len(text) - TEXT_CHARS
        for line in shown_lines(text[:TEXT_CHARS]):
            print(f"  | {line}")
        if rest > 0:
            print(f"  | … {rest:,} more characters")
        if ann is not None and "forms" in ann:
            print_tokens(ann)
        print()


def print_tokens(ann: dict) -> None:
    """One line per sentence: form/lemma/UPOS for each token."""
    for number, (start, end) in enumerate(ann["sentences"], 1):
        tokens = [f"{ann['forms'][i]}/{ann['lemmas'][i] or '_'}/{ann['upos'][i] or '_'}" for i in range(start, end + 1)]
        print(f"  s{number}: " + shown(" ".join(tokens)))


def print_dropped(spec: DatasetSpec, version: PublishedVersion, as_json: bool = False) -> None:
    """The drop ledger of the published version, then each part's warnings (file:line, reason)."""
    m = version.manifest
    lines = list(dropped_lines(spec, m))
    ledger = Ledger.of(m.drops)
    if as_json:
        print(json_text({"dataset": spec.key, "dropped": sum(ledger.dropped.values()), "drops": ledger.dropped,
                         "kept_with_warning": ledger.kept, "warnings": lines}, indent=True))
        return
    print(f"{shown(spec.key)}: {ledger.line()}")
    for line in lines:
        print(f"  {shown(line)}")


def dropped_lines(spec: DatasetSpec, m: Manifest) -> Iterator[str]:
    yield from m.discovery_warnings
    store = DatasetStore(spec)
    for key, fingerprint in m.shards:
        meta = store.read_part_meta(key)
        if meta is None:  # the warnings are kept in the parts: a bucket's version read on another host has none
            yield f"{key}: its part is not on this host (warnings not shown)"
        elif meta.fingerprint != fingerprint:
            yield f"{key}: its part changed since this version was published (warnings not shown)"
        elif meta.warnings:
            yield from meta.warnings
            dropped = sum(meta.drops.values())
            listed = sum(1 for w in meta.warnings if w.endswith("]"))  # a drop's warning ends in [reason]
            if dropped > listed:
                yield (f"{key}: … {dropped - listed:,} more (each file keeps the warnings of its first "
                       f"{MAX_WARNINGS_KEPT} drops)")
